"""Structural candidates tuned before they are verified.

A rewrite changes how much work a program does (rows per program, a split, a fused pass), so the launch
configuration it inherited is rarely its best (H100 corpus batch_l of 2026-12-06: lightllm's KV quantize copy took
``rows_per_program`` with its original ``num_warps=1``, 64 rows of 128 elements per program, 1.19x where
torch.compile ran 1.33x faster still; searched first, 1.62x in batch_m). ``search_candidates`` gives each family's
first candidate a tune job of its own (side by side), the candidate as written its baseline and its outputs the
screen's reference; a winner replaces the candidate's source (same id, the configuration in its description).

- A sibling of the same family and parent whose source differs from a searched candidate's only in numbers
  (another size of the same rewrite) is dropped: the search covered it.
- A candidate whose launch space is its parent's (only a kernel's body changed, ``space.launch_shape``) is not
  searched: its parent's search covered it (batch_m: kernl llama_ff's ``cheap_math`` candidate of a tuned matmul
  searched its 30 configurations again, 70 s of a run's wall).
- A tuned candidate keeps the rewrite as written (``as_written``): if the tuned one fails verification, the verifier
  checks the one as written in its place (``fallback``). In batch_m absmax_norm's tuned launch failed (a tuner
  defect since fixed) and the task lost a 1.7x rewrite that had verified as written the batch before.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import libcst as cst

from tritondx.tools.rewrite.base import NUMBER
from tritondx.tools.tune.run import TuneResult
from tritondx.tools.tune.space import launch_shape

#: what a tuned candidate's description adds to the rewrite's (``search_candidates``; ``fallback`` takes it off)
TUNED_NOTE = "; its launch tuned: "


@dataclass
class Searched:
    records: list[dict]                                                  # the candidates to verify, in order
    results: dict[str, TuneResult] = field(default_factory=dict)        # candidate id -> its search
    inherited: list[str] = field(default_factory=list)                  # ids whose parent's search covers them
    dropped: list[str] = field(default_factory=list)                    # siblings a search covered


def _masked(path: str) -> str:
    return NUMBER.sub("#", Path(path).read_text())   # rewrite.base.NUMBER: siblings differ only in numbers


def same_space(path: str, parent: str | None) -> bool:
    """The candidate at ``path`` has the launch space of the source at ``parent``."""
    if parent is None:
        return False
    try:
        return launch_shape(Path(path).read_text()) == launch_shape(Path(parent).read_text())
    except (OSError, SyntaxError, ValueError, cst.ParserSyntaxError):
        return False


def search_candidates(records: list[dict], parents: dict[str, str],
                      search: Callable[[dict], TuneResult]) -> Searched:
    """``records`` (candidate dicts: id, family, parent, path, description, params) with each structural one's
    launch searched by ``search`` (one tune job; the jobs run side by side), ``parents`` mapping a parent id to its
    source path. The tuner's own winners (family ``tune``) pass through."""
    structural = [r for r in records if r.get("family") != "tune"]
    inherited = [r["id"] for r in structural if same_space(r["path"], parents.get(r.get("parent", "")))]
    todo = [r for r in structural if r["id"] not in inherited]
    if not todo:
        return Searched(records=records, inherited=inherited)
    firsts: dict[tuple, dict] = {}
    for r in todo:
        firsts.setdefault((r["family"], r.get("parent")), r)
    heads = list(firsts.values())
    with ThreadPoolExecutor(max_workers=len(heads)) as pool:
        results = dict(zip([r["id"] for r in heads], pool.map(search, heads)))
    covered = {(r["family"], r.get("parent")): _masked(r["path"])
               for r in heads if results[r["id"]].timed and results[r["id"]].knobs}
    out, dropped = [], []
    for r in records:
        res = results.get(r["id"])
        if res is None:
            key = (r.get("family"), r.get("parent"))
            if r in todo and key in covered and _masked(r["path"]) == covered[key]:
                dropped.append(r["id"])
            else:
                out.append(r)
            continue
        if res.winners:
            w = res.winners[0]
            path = Path(r["path"]).with_name(Path(r["path"]).stem + "_tuned.py")
            path.write_text(w.source)
            r = {**r, "path": str(path), "params": {**(r.get("params") or {}), "tuned": w.label},
                 "as_written": r["path"],
                 "description": f"{r['description']}{TUNED_NOTE}{w.label} ({w.speedup:.2f}x over the "
                                f"rewrite as written in the tuner's screen)"}
        out.append(r)
    return Searched(records=out, results=results, inherited=inherited, dropped=dropped)


def fallback(record: dict, why: str) -> dict:
    """The rewrite as written in place of its tuned launch that failed verification (``why``: the verdict's class):
    same id, the tuned configuration named in its description."""
    params = {k: v for k, v in (record.get("params") or {}).items() if k != "tuned"}
    desc = record.get("description", "")
    base, _, tuned = desc.partition(TUNED_NOTE)
    label = tuned.split(" (", 1)[0] if tuned else "its tuned launch"
    return {**record, "path": record["as_written"], "as_written": None, "params": params,
            "description": f"{base}; as written: its tuned launch ({label}) failed verification ({why})"}
