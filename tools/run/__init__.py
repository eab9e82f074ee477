"""The run's own bookkeeping, on the orchestrator side (trusted; no task or candidate code here).

- ``phases``: where a run's time goes (wall seconds per phase, summed over the run);
- ``checkpoint_retry``: checkpoint writes that wait out a locked SQLite database.

Imports name the module; nothing is re-exported here.
"""
