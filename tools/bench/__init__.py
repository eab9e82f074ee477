"""Device jobs that run a task's kernels (untrusted side: each runs inside a sandboxed worker, next to
the task's own code; the orchestrator only reads their JSON results).

- ``bench``: side-by-side timing of a task's variants on a GPU (the ``bench`` and ``ceilings`` jobs);
- ``launch``: one launcher call on the first bench shape (for external profilers such as ncu);
- ``capture``: the task's kernels compiled for a named target as the JIT would, without a device.

Imports name the module; nothing is re-exported here.
"""
