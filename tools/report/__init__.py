"""Run outputs (trusted side: plain records in, files out): ``writer`` (the optimized task file,
report.json/md/html), ``html``, ``closure`` (every finding fixed, tried or open) and ``recheck`` (the
detectors re-run on the best version)."""
