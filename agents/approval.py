"""Human approval (``--interactive``): a person reviews each rewrite before it is verified, and the
best kernel before it is accepted.

Follows the human-interrupt pattern of langchain-ai/agents-from-scratch (Agent Inbox): each request
carries an ``action_request`` (action + args), a ``config`` saying which responses are allowed and a
``description``; the node calls ``interrupt([request])[0]`` and branches on ``response["type"]``:

- ``accept``: the candidate goes to the verifier as proposed;
- ``reject`` (Agent Inbox: ``ignore``): it is dropped, recorded as rejected by a person;
- ``edit``: ``response["args"]["source"]`` (or Agent Inbox's ``args.args.source``) replaces the candidate's source;
- ``feedback`` (Agent Inbox: ``response``): the text goes to the rewriter as ``human_feedback`` and a new
  rewrite round starts; the candidates already approved or edited in this round are verified first, the one
  answered with feedback and those not yet reviewed are dropped (``dropped_for_feedback``).

The graph pauses at each ``interrupt``; the checkpoint keeps it paused across processes (``tritondx
resume``), and ``Command(resume=[response])`` continues it. Without ``config.interactive`` both nodes
pass straight through. Everything put into a request or the state is plain data.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from tritondx.agents.common import best_path, logger, run_config, run_dir
from tritondx.config import RunContext
from tritondx.state import DXState
from tritondx.tools.records.run import Candidate, Decision, Verification

ALLOWED = ["accept", "reject", "edit", "feedback"]
_ALIASES = {"ignore": "reject", "response": "feedback", "approve": "accept"}
_CONFIG = {"allow_accept": True, "allow_ignore": True, "allow_edit": True, "allow_respond": True}


def response_kind(response: dict[str, Any]) -> str:
    kind = _ALIASES.get(response.get("type", ""), response.get("type", ""))
    if kind not in ALLOWED:
        raise ValueError(f"approval: unknown response type {response.get('type')!r}; expected one of {ALLOWED}")
    return kind


def edited_source(response: dict[str, Any]) -> str:
    args = response.get("args")
    if isinstance(args, dict) and isinstance(args.get("args"), dict):  # Agent Inbox: {"action", "args": {...}}
        args = args["args"]
    if isinstance(args, dict) and isinstance(args.get("source"), str):
        return args["source"]
    if isinstance(args, str):
        return args
    raise ValueError("approval: an edit response needs args.source (the edited task file)")


def feedback_text(response: dict[str, Any]) -> str:
    args = response.get("args")
    if isinstance(args, dict):
        args = args.get("feedback") or args.get("text") or ""
    return str(args or "").strip()


def unified_diff(old_path: str, new_source: str, old_name: str, new_name: str) -> str:
    old = Path(old_path).read_text() if old_path and Path(old_path).exists() else ""
    return "".join(difflib.unified_diff(old.splitlines(True), new_source.splitlines(True), old_name, new_name))


def evidence_for(state: DXState, ids: list[str]) -> list[dict[str, Any]]:
    """The findings behind a candidate, with the IR and source lines they quote."""
    by_id = {f["id"]: f for f in state.get("findings", [])}
    keys = ("id", "tier", "stage", "detector", "kernel", "message", "source_line", "source_text", "ir_line",
            "suggests")
    return [{k: by_id[i].get(k) for k in keys} for i in ids if i in by_id]


def _lineage(state: DXState, cid: str | None) -> list[dict]:
    cands = {c["id"]: c for c in state.get("candidates", [])}
    out = []
    while cid in cands:
        out.append(cands[cid])
        cid = cands[cid].get("parent")
    return list(reversed(out))


def _describe(kind: str, head: str, evidence: list[dict], diff: str) -> str:
    lines = [head, "", "Evidence:"]
    for f in evidence or [{"tier": "-", "detector": "none", "message": "no finding recorded"}]:
        where = f" (line {f['source_line']}: {f['source_text']})" if f.get("source_line") else ""
        lines.append(f"- [{f['tier']}] {f['detector']}: {f['message']}{where}")
        if f.get("ir_line"):
            lines.append(f"    {f.get('stage')}: {f['ir_line'][:160]}")
    lines += ["", "```diff", diff.rstrip() or "(no change)", "```", "",
              "Respond: accept | reject | edit (args.source = edited file) | feedback (args = text for the rewriter)"]
    return "\n".join(lines)


def candidate_request(state: DXState, c: dict[str, Any]) -> dict[str, Any]:
    source = Path(c["path"]).read_text()
    base = best_path(state)
    parent = (state.get("best") or {}).get("id", "initial")
    diff = unified_diff(base, source, f"{parent} (current best)", f"{c['id']} ({c['family']})")
    evidence = evidence_for(state, c.get("motivated_by", []))
    head = (f"Round {c['round']} ({c['tier']} evidence): candidate {c['id']} `{c['family']}` "
            f"{c.get('params') or ''}\n{c.get('description', '')}\nPrediction: {c.get('prediction', '')}")
    return {"kind": "candidate",
            "action_request": {"action": "apply_rewrite", "args": {
                "candidate": c["id"], "family": c["family"], "round": c["round"], "tier": c["tier"],
                "path": c["path"], "source": source}},
            "config": _CONFIG, "allowed": ALLOWED, "evidence": evidence, "diff": diff,
            "description": _describe("candidate", head, evidence, diff)}


def final_request(state: DXState) -> dict[str, Any]:
    best = state.get("best") or {}
    path = best.get("path") or state["task_path"]
    source = Path(path).read_text()
    diff = unified_diff(state["task_path"], source, "initial", f"{best.get('id')} (best)")
    lineage = _lineage(state, best.get("id"))
    ids = [i for c in lineage for i in c.get("motivated_by", [])]
    evidence = evidence_for(state, list(dict.fromkeys(ids)))
    if best.get("measured"):
        speed = (f"{best.get('speedup') or 0:.2f}x faster than the initial kernel, "
                 f"{best.get('roofline_fraction') or 0:.0%} of roofline")
    else:
        speed = "verified correct; speed not measured on this backend"
    head = (f"Final approval: accept {best.get('id')} ({' + '.join(c['family'] for c in lineage) or 'initial'}) "
            f"as the optimized kernel? {speed}. Rounds: {state.get('round', 0)}.")
    return {"kind": "final",
            "action_request": {"action": "accept_best", "args": {
                "candidate": best.get("id"), "path": path, "source": source, "speedup": best.get("speedup"),
                "measured": bool(best.get("measured"))}},
            "config": _CONFIG, "allowed": ALLOWED, "evidence": evidence, "diff": diff,
            "description": _describe("final", head, evidence, diff)}


def _said(node: str, rnd: int, cid: str | None, decision: str, reason: str) -> dict[str, Any]:
    """A person's answer as a decision record."""
    return Decision(node=node, kind="person", round=rnd, candidate=cid, decision=decision, reason=reason).record()


def _rejection(cid: str, reason: str) -> dict[str, Any]:
    return Verification.of(cid, "person", False, "rejected_by_human", reason, "human")


# verification class of a candidate dropped because a person asked for a new round (not a rejection)
DROPPED = "dropped_for_feedback"


def _dropped(cid: str, reason: str) -> dict[str, Any]:
    return {**_rejection(cid, reason), "klass": DROPPED}


def _write_edit(state: DXState, c: dict[str, Any], source: str) -> dict[str, Any]:
    folder = run_dir(state) / "candidates"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{c['id']}_{c['family'].replace(':', '_')}.edited.py"
    path.write_text(source)
    return Candidate(**{**c, "path": str(path), "origin": "human-edit", "edited_from": c["path"],
                        "description": f"{c.get('description', '')} [edited by a person]".strip()}).model_dump()


def approval_node(state: DXState, config: RunnableConfig, runtime: Runtime[RunContext] | None = None
                  ) -> Command[Literal["verifier", "rewriter"]]:
    """Per-candidate review between the rewriter and the verifier (one interrupt per candidate)."""
    cfg = run_config(runtime)
    cands = {c["id"]: c for c in state.get("candidates", [])}
    pending = [cands[i] for i in state.get("pending", []) if i in cands]
    if not cfg.interactive or not pending:
        return Command(goto="verifier")
    log = logger("approval", config)
    keep: list[str] = []
    updated: list[dict] = []
    rejected: list[dict] = []
    decisions: list[dict] = []
    feedback: str | None = None
    rnd = state.get("round", 0)
    for at, c in enumerate(pending):
        response = interrupt([candidate_request(state, c)])[0]
        kind = response_kind(response)
        if kind == "accept":
            keep.append(c["id"])
            decisions.append(_said("approval", rnd, c["id"], "accept",
                                   f"{c['id']} ({c['family']}) approved as proposed"))
        elif kind == "reject":
            rejected.append(_rejection(c["id"], "rejected at the approval prompt"))
            decisions.append(_said("approval", rnd, c["id"], "reject",
                                   f"{c['id']} ({c['family']}) rejected by a person"))
        elif kind == "edit":
            source = edited_source(response)
            if source == Path(c["path"]).read_text():
                keep.append(c["id"])
                decisions.append(_said("approval", rnd, c["id"], "accept",
                                       f"{c['id']} edited without change: approved as proposed"))
                continue
            rec = _write_edit(state, c, source)
            updated.append(rec)
            keep.append(c["id"])
            decisions.append(_said("approval", rnd, c["id"], "edit",
                                   f"{c['id']} ({c['family']}) edited by a person: {rec['path']}"))
        else:  # feedback: the rest of this round is dropped, the rewriter gets the note
            feedback = feedback_text(response) or "(empty feedback)"
            decisions.append(_said("approval", rnd, c["id"], "feedback",
                                   f"feedback for the rewriter: {feedback[:300]}"))
            break
    if feedback is not None:
        # the person asked for a new round: what they approved or edited is still verified (and can win),
        # the candidate they answered with feedback and the ones they never saw are dropped, saying so
        rejected.append(_dropped(pending[at]["id"], "a person answered it with feedback instead of approving it"))
        unseen = [c["id"] for c in pending[at + 1:]]
        rejected += [_dropped(cid, "not reviewed: a person asked for a new rewrite round with feedback")
                     for cid in unseen]
        log.info("feedback", round=rnd, kept=keep, dropped=[r["id"] for r in rejected if r["klass"] == DROPPED])
        update = {"verifications": rejected, "candidates": updated, "human_feedback": feedback,
                  "decisions": decisions}
        if keep:  # verify the kept ones first; the verifier then routes to the rewriter with the note
            return Command(goto="verifier", update={**update, "pending": keep})
        return Command(goto="rewriter", update={**update, "pending": []})
    log.info("reviewed", round=rnd, approved=keep, rejected=[r["id"] for r in rejected],
             edited=[r["id"] for r in updated])
    return Command(goto="verifier", update={"verifications": rejected, "candidates": updated, "pending": keep,
                                            "decisions": decisions})


def final_approval_node(state: DXState, config: RunnableConfig, runtime: Runtime[RunContext] | None = None
                        ) -> Command[Literal["report", "rewriter", "verifier"]]:
    """After the verifier decides to stop: a person accepts the best kernel, keeps the initial one, edits the
    best one (verified again as a new candidate) or asks for another rewrite round with feedback."""
    cfg = run_config(runtime)
    best = state.get("best") or {}
    if not cfg.interactive or best.get("id") in (None, "initial"):
        return Command(goto="report")
    log = logger("final_approval", config)
    response = interrupt([final_request(state)])[0]
    kind = response_kind(response)
    rnd = state.get("round", 0)
    if kind == "accept":
        log.info("best_accepted", best=best.get("id"))
        return Command(goto="report", update={"status": "done", "decisions": [
            _said("final_approval", rnd, best.get("id"), "accept",
                  f"a person accepted {best.get('id')} as the optimized kernel")]})
    if kind == "reject":
        log.info("best_rejected", best=best.get("id"))
        initial = {"id": "initial", "path": state["task_path"], "median_ms": None, "speedup": 1.0,
                   "rejected_best": best.get("id")}
        return Command(goto="report", update={"status": "done", "best": initial, "decisions": [
            _said("final_approval", rnd, best.get("id"), "reject",
                  f"a person rejected {best.get('id')}; the initial kernel is kept")]})
    if kind == "feedback":
        text = feedback_text(response) or "(empty feedback)"
        return Command(goto="rewriter", update={"status": "running", "human_feedback": text, "decisions": [
            _said("final_approval", rnd, best.get("id"), "feedback",
                  f"feedback for the rewriter: {text[:300]}")]})
    # edit: the edited best kernel becomes a new candidate and is verified like any other
    cands = {c["id"]: c for c in state.get("candidates", [])}
    base = cands.get(best.get("id"), {"family": "initial", "motivated_by": [], "tier": "triage"})
    n = sum(1 for c in cands if c.startswith(f"r{rnd}h")) + 1
    cid = f"r{rnd}h{n}"
    folder = run_dir(state) / "candidates"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{cid}_human_edit.py"
    path.write_text(edited_source(response))
    rec = Candidate(id=cid, round=rnd, tier=base.get("tier", "triage"), family="human_edit",
                    params={"edited_from": best.get("id")}, description=f"{best.get('id')} edited by a person",
                    motivated_by=base.get("motivated_by", []), path=str(path), parent=best.get("id"),
                    signature=f"human_edit:{cid}", origin="human-edit").model_dump()
    return Command(goto="verifier", update={"status": "running", "candidates": [rec], "pending": [cid], "decisions": [
        _said("final_approval", rnd, best.get("id"), "edit",
              f"a person edited {best.get('id')}; {cid} goes to the verifier")]})
