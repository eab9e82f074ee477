"""Running untrusted work: the trust boundary itself.

Trusted (orchestrator side, builds the boundary): ``sandbox`` (a job in its own process: scrubbed
environment, limits, timeout), ``sandbox_fs`` (the read-only file system view a job sees),
``triton_cache`` (a compile cache a candidate cannot poison), ``gpulock`` (exclusive device time for
timing; its ``phase`` is also taken inside jobs), ``server`` (a long-lived job answering a stream of
requests: the same sandbox as a job, started the same way).

Untrusted side (runs inside the sandboxed job, next to task and candidate code): ``worker`` (the job's
entry point, ``python -m tritondx.tools.exec.worker``), ``kernel_errors`` (one line for a kernel's
exception).

Imports name the module; nothing is re-exported here.
"""
