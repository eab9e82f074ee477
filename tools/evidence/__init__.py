"""Diagnosis evidence, tier by tier (trusted side: reads task source, IR text and job results; the
code that runs a kernel does so through a sandboxed job, never in this process).

- ``triage`` / ``triage_patterns``: tier 0, patterns on the task source (ast only);
- ``profiler``: tier 1, roofline position from measurements; ``work``: the FLOPs and bytes it needs;
- ``ncu``: hardware counters through Nsight Compute (the launch runs in a sandboxed job);
- ``analysis``: the IR and compiler tiers (capture the IR for a target, run that tier's detectors).

Imports name the module; nothing is re-exported here.
"""
