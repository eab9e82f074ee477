"""Running untrusted work: the trust boundary itself.

Trusted (orchestrator side, builds the boundary): ``sandbox`` (a job in its own process: scrubbed
environment, limits, timeout), ``sandbox_fs`` (the read-only file system view a job sees),
``triton_cache`` (a compile cache a candidate cannot poison), ``gpulock`` (exclusive device time for
timing; its ``phase`` is also taken inside jobs), ``held_sampler`` (how long a batch's device was held),
``server`` (a long-lived job answering a stream of requests: the same sandbox as a job, started the same
way), ``jobs`` (a job on a backend's device: the lock, a retry alone after an out-of-memory, a job's error).

Untrusted side (runs inside the sandboxed job, next to task and candidate code): ``worker`` (the job's
entry point, ``python -m tritondx.tools.exec.worker``), ``kinds`` (the job kinds and the function of each,
named as strings: the worker's allowlist, so nothing here imports the folders that implement them),
``rejected`` (what a job's function raises when its subject fails), ``kernel_errors`` (one line for a
kernel's exception).

Generic: of the ``tools/`` folders, ``exec/`` imports only ``backends/`` (and may import ``records/``); it knows
no job kind's module but by name, in ``kinds``.

Imports name the module; nothing is re-exported here.
"""
