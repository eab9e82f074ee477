"""Verification of candidate kernels, split along the trust boundary.

Trusted (never imports candidate code): ``judge`` (the ``verify`` job: makes inputs with seeds it
draws itself, computes the reference, compares), ``compare``, ``cases``, ``policy`` (static source
policy, run by the orchestrator), ``timing`` (side-by-side timing, ncu cross-check), ``records``,
``select`` / ``route`` (what the verifier node decides from the evidence).

Untrusted: ``runner.py`` is run as a script in its own sandboxed process with only the candidate
file in its folder; it loads ``guard.py`` and ``wire.py`` by path (no ``tritondx.tools.verify``
module is imported there) and talks to the judge over pipes only (``wire``: framed JSON headers
and raw tensor bytes, never pickle). What the runner reports can only reject a candidate.
"""
