"""Run outputs (trusted side: plain records in, files out; the report node, ``agents/report.py``, hands them over):
``writer`` (the optimized task file, report.json/md/html), ``html``, ``closure`` (every finding fixed, tried or
open), ``checked`` (what the verifier checked), ``text``."""
