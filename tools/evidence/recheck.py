"""Re-run the detectors on the best version, for the report's closed-findings table (tools/report/closure.py;
the report node asks for it and hands the result to the writer).

Triage reads the source (no compile); the IR and compiler tiers capture the best version's IR for the
run's target (a sandboxed compile-only job each, a few seconds) and run that tier's detectors. The
result is cached in the run folder by the best file's hash, so writing the report again (resume,
replay) does not compile again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tritondx.tools.task.spec import load_task
from tritondx.tools.evidence.triage import triage

CACHE = "closure_recheck.json"


def recheck_best(best_path: str, tiers: list[str], target: str | None, run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Tier -> the findings its detectors report on ``best_path`` (a tier missing: it could not be re-run;
    the profile tier is never re-run here: the verifier's measurements are its evidence)."""
    digest = hashlib.sha256(Path(best_path).read_bytes()).hexdigest()
    cache = Path(run_dir) / CACHE
    try:
        cached = json.loads(cache.read_text())
        if cached.get("sha256") == digest and cached.get("tiers") == sorted(tiers):
            return cached["findings"]
    except (OSError, ValueError):
        pass
    out: dict[str, list[dict[str, Any]]] = {}
    if "triage" in tiers:
        _, found = triage(load_task(best_path))
        out["triage"] = [f.model_dump() for f in found]
    for tier in ("ir", "compiler"):
        if tier in tiers and target:
            from tritondx.tools.evidence.analysis import analyze_tier
            found, _, note = analyze_tier(tier, best_path, target, Path(run_dir) / "recheck", 0)
            if not note:
                out[tier] = [f.model_dump() for f in found]
    try:
        cache.write_text(json.dumps({"sha256": digest, "tiers": sorted(tiers), "findings": out}))
    except OSError:   # a read-only run folder: the table is still written from this computation
        pass
    return out
