"""Verification of candidate kernels, in zones that show the trust boundary (issue 36).

This folder's own modules are the orchestrator side (trusted; they run in the orchestrator's process and never
import candidate code): ``policy`` (static source policy, before any job), ``verification`` (the verify job and its
sealed answer), ``timing`` (the bench and hwcheck jobs), ``staged`` (screen, time, confirm), ``select`` /
``select_untimed`` / ``route`` (what the verifier and select nodes decide from the evidence), ``servers`` (one judge
server per task), ``check_file`` (``tritondx verify``); the records are in ``tools/records/verify.py``. The zones
below it: ``plan/`` (trusted: which checks a candidate gets, read from the sources without running candidate code),
``judge/`` (trusted: the judge inside the sandboxed verify job, which makes the inputs, computes the reference,
compares and seals the verdict; it starts the runners and never imports candidate code) and ``runner/`` (untrusted:
what runs in the candidate's own sandboxed process; run and loaded by file path, it imports no
``tritondx.tools.verify`` module, and what it reports can only reject a candidate). A candidate cannot forge the
verdict, patch the checker or the task, or predict the seeds; the Triton-only property on CPU is hardened only (its
recorders run in the candidate's process), and on a GPU ncu confirms a claimed speedup from outside that process.
The job kinds' functions are named in ``exec/kinds.py``.
"""
