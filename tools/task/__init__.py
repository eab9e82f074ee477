"""The kernel task: the file format a run is given and how its parts are read.

- ``spec``: the task format checked statically (trusted side: ast only, no user code runs);
- ``module``: loading a task module and reading its parts (untrusted side: only ever inside a sandboxed
  worker, since it executes the task file);
- ``probe``: task settings the probe job checks by running them (untrusted side, inside the worker);
- ``probe_job``: the probe job started and answered (orchestrator side): the task usable, or one line why not;
- ``capture_job``: the IR capture job started and answered (orchestrator side): the task's kernels compiled for
  a named target.

Imports name the module (``from tritondx.tools.task.spec import load_task``); nothing is re-exported here.
"""
