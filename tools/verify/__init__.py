"""Verification of candidate kernels, split along the trust boundary.

Trusted (never imports candidate code): ``judge`` (the ``verify`` job: makes inputs with seeds it
draws itself, computes the reference, compares), ``hwcheck`` (the ``hwcheck`` job: ncu's kernel
time of the initial and the best kernel, each in its own runner), ``spawn`` (starts a runner),
``compare``, ``cases`` (the check planner's seam), ``seal`` (the verdict's HMAC), ``policy``
(static source policy), ``verification`` / ``timing`` (orchestrator side: the verify and bench jobs and
their answers; the probe and capture jobs' calls are in ``tools/task``, ``probe_job`` and ``capture_job``),
``prestart`` (a round's warm runners, started first thing in its ``verify`` job),
``judge_server`` (the judge as one server per task: every round's ``verify`` requests; its warm
runners kept, what a request left removed), ``servers`` (orchestrator side: one server per task),
``select`` / ``route`` (what the verifier node decides from the evidence), ``select_untimed`` (which
kernel is the result when speed cannot be measured), ``check_file`` (``tritondx verify``); its records are in ``tools/records/verify.py``.
``impl``: the probe job (runs inside the sandboxed worker, next to the task's code) and what the judge
shares with it (the input check, the device phase). The worker finds each job kind's function here by
name (``exec/kinds.py``).

Guaranteed by construction: a candidate cannot forge the verdict, patch the checker or the task, or
predict the seeds. Hardened only: the Triton-only property on CPU (its recorders run in the
candidate's process); on a GPU, ncu confirms a claimed speedup from outside that process.

Untrusted: ``runner.py`` is run as a script in its own sandboxed process with only the candidate
file in its folder; it loads ``guard.py`` and ``wire.py`` by path (no ``tritondx.tools.verify``
module is imported there) and talks to the judge over pipes only (``wire``: framed JSON headers
and raw tensor bytes, never pickle). What the runner reports can only reject a candidate.
"""
