"""The rewriter's LLM seam: ask an OpenAI-compatible model for a candidate, checked statically."""

from __future__ import annotations

from typing import Any

from tritondx.tools.llm.client import LLMClient
from tritondx.tools.llm.config import LLMConfig
from tritondx.tools.llm.rewriter import LLMRewriter
from tritondx.tools.rewrite.base import Proposal, RewriteContext
from tritondx.tools.task.spec import parse_task_source


def _compile_check(path: str):
    def check(source: str) -> str | None:
        try:
            parse_task_source(source, path)
        except Exception as exc:  # the message goes back to the model
            return str(exc)
        try:
            compile(source, path, "exec")
        except SyntaxError as exc:
            return f"syntax error at line {exc.lineno}: {exc.msg}"
        return None
    return check


def llm_propose(ctx: RewriteContext, log, *, base_url: str | None, model: str | None, history: list[str],
                feedback: str | None, prev_usage: dict[str, Any] | None) -> tuple[list[Proposal], dict]:
    """One candidate from the model (``history``: the run's earlier candidates, one line each; ``feedback``: a
    person's note) and the run's token usage so far plus this call's."""
    llm_cfg = LLMConfig.from_env(base_url=base_url, model=model)
    client = LLMClient(llm_cfg)
    rewriter = LLMRewriter(client)
    proposal = rewriter.propose(ctx.spec.source, ctx.findings, history, feedback, _compile_check(ctx.spec.path))
    prev = prev_usage or {}
    usage = client.usage.model_dump()
    total = {k: (prev.get(k, 0) or 0) + (v or 0) for k, v in usage.items() if isinstance(v, (int, float))}
    if proposal is None:
        log.warning("llm_fallback", reason=rewriter.last_failure, kind=rewriter.last_failure_kind)
        total["fallbacks"] = prev.get("fallbacks", 0) + 1
        return [], total
    known = {f.id for f in ctx.findings}
    return [Proposal(family=f"llm:{proposal.rewrite_family}", source=proposal.source,
                     params={"model": llm_cfg.model}, description=proposal.expected_effect[:300] or "LLM rewrite",
                     motivated_by=[i for i in proposal.finding_ids if i in known],
                     prediction=proposal.expected_effect)], total
