"""The run's own records, as the graph state keeps them (dumped to plain data; ``state.py``): the candidates a
round proposes, each check's verdict on one, and each node's decisions. Readers ask their fields (``check``,
``kind``), never the shape of an id."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: which check a verification records: the judge's (the verifier, or the full checks of a would-be winner), the
#: bench's (timing tampering, a failed bench, faster than the roofline allows), the hardware counters' (a claimed
#: gain not confirmed), or a person's (``--interactive``)
Check = Literal["judge", "timing", "hardware", "person"]
#: a decision that routes the run (the select node's), a note a node leaves, or a person's answer
DecisionKind = Literal["route", "note", "person"]


class Candidate(BaseModel):
    """One rewritten kernel a round proposes (a file in the run folder) and why."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="r<round>c<n> (r<round>h<n>: a person's edit)")
    round: int
    tier: str
    family: str
    params: Any = None
    description: str = ""
    motivated_by: list[str] = Field(default_factory=list, description="finding ids the rewrite answers")
    prediction: str = ""
    path: str
    parent: str | None = Field(None, description="the version it was rewritten from: 'initial' or a candidate id")
    signature: str = ""
    origin: Literal["expert", "llm", "tuner", "human-edit"] = "expert"
    human_feedback: str | None = None
    edited_from: str | None = Field(None, description="the file a person's edit replaced (--interactive)")
    as_written: str | None = Field(None, description="the rewrite as written, where the tuner replaced its source "
                                                     "with a tuned launch: verified in its place if the tuned one fails")


class Verification(BaseModel):
    """One check's verdict on one candidate. The judge's carries the rest of its ``Verdict`` too (coverage, checks
    run, seconds, ...)."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(description="unique in the run (the state merges by it): the candidate's id for the judge's or a "
                                "person's verdict, '<candidate>:<check>' for a later check's")
    candidate_id: str
    check: Check = "judge"
    passed: bool
    klass: str | None = None
    reason: str = ""
    backend: str = ""

    @classmethod
    def of(cls, candidate_id: str, check: Check, passed: bool, klass: str | None, reason: str, backend: str,
           **rest: Any) -> dict[str, Any]:
        """A verification as the state keeps it."""
        key = candidate_id if check in ("judge", "person") else f"{candidate_id}:{check}"
        return cls(id=key, candidate_id=candidate_id, check=check, passed=passed, klass=klass, reason=reason,
                   backend=backend, **rest).model_dump()


class Decision(BaseModel):
    """What a node decided, with its reason (the report's trail)."""

    model_config = ConfigDict(extra="forbid")

    node: str
    kind: DecisionKind = "note"
    decision: str
    reason: str = ""
    round: int | None = None
    candidate: str | None = None
    passed: list[str] | None = None
    gain: float | None = None

    def record(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)
