"""The judge (trusted): the code of the sandboxed ``verify``, ``hwcheck`` and ``probe`` jobs and the judge server,
which never imports candidate code. ``job`` (the ``verify`` job) and ``server`` (one per task) check candidates
with ``candidate.Judge``: ``case_data`` makes each case's inputs and reference, ``compare`` compares, ``contract``
asks whether the original itself passes a derived case, ``call_checks`` and ``coverage`` read what a runner
reported (evidence that can only reject), ``trail`` names the checks and ``seal`` signs the verdict with a key only
the job got. ``spawn``, ``warm`` and ``prestart`` start the candidate's runners (``verify/runner/``, by file path, in
sandboxed processes of their own). ``hwcheck`` is ncu's check of a claimed speedup; ``probe`` is the probe of the
user's own task and what the judge shares with it (the input check, the device phase).
"""
