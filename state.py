"""Graph state: a TypedDict with reducers. Values are plain JSON-able data (pydantic models dumped),
so checkpoints hold only builtins; large artifacts live in the run folder, referenced by path+hash."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict


def merge_by_id(left: list[dict], right: list[dict]) -> list[dict]:
    """Append records, replacing any with the same id."""
    out = {r["id"]: r for r in left or []}
    for r in right or []:
        out[r["id"]] = r
    return list(out.values())


def merge_dict(left: dict, right: dict) -> dict:
    return {**(left or {}), **(right or {})}


def add_seconds(left: dict, right: dict) -> dict:
    """Sum per-key seconds (the cost ledger over the whole run)."""
    out = dict(left or {})
    for k, v in (right or {}).items():
        out[k] = round(out.get(k, 0.0) + v, 3)
    return out


class DXState(TypedDict, total=False):
    # inputs
    task_path: str            # the initial task file (copied into the run folder)
    run_dir: str
    # what we learned up front
    task_name: str
    kernel_class: str
    backend: str
    target: str
    probe: dict[str, Any]     # ops the initial launcher uses, tolerances, output count
    # evidence, per tier
    tiers_done: Annotated[list[str], operator.add]
    findings: Annotated[list[dict], merge_by_id]
    artifacts: Annotated[dict[str, dict], merge_dict]      # name -> ArtifactRef
    insufficient: Annotated[list[str], operator.add]        # finding ids that a failed rewrite relied on
    # search
    candidates: Annotated[list[dict], merge_by_id]          # id, round, tier, family, params, path, motivated_by
    pending: list[str]                                      # candidate ids awaiting verification
    family_attempts: Annotated[list[dict], operator.add]    # round, family, outcome (tools/rewrite/expert.py)
    force_families: list[str]                               # families the next round tries first (untried)
    verifications: Annotated[list[dict], merge_by_id]
    measurements: Annotated[list[dict], merge_by_id]        # per round bench results (summarized)
    best: dict[str, Any]                                    # id, path, median_ms, speedup, roofline_fraction
    round: int
    rounds_at_tier: int
    decisions: Annotated[list[dict], operator.add]          # verifier's routing decisions with reasons
    llm_usage: dict[str, Any]
    # the cost ledger (tools/run/phases.py): node:<name>, phase:<name>, device:jobs, device:held seconds, summed
    cost: Annotated[dict[str, float], add_seconds]
    round_result: dict[str, Any]                            # this round: checked and passed ids, measured gain
    tune: Annotated[list[dict], merge_by_id]                # each tuner run: launches, configurations, winners
    tuned_for: Annotated[list[str], operator.add]           # versions (best ids) the tuner has searched
    after_tune: str | None                                  # where the verifier routed before the tuner came first
    to_tune: list[dict]                                     # the rewriter's candidates, each tuned before verified
    final_profile: dict[str, Any]                           # counters of initial and best after the search
    human_feedback: str | None
    status: str
