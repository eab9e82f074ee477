"""Pydantic records of verification and timing evidence (what the orchestrator and the graph keep)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


#: how the check that decided a rejection is marked in a verdict's list of checks run (``Verdict.ran``)
DECIDED = " [decided: {klass}]"
DECIDED_TAG = DECIDED.split("{")[0]


class CheckRecord(BaseModel):
    """One judged call of a candidate: the case, what the runner reported, how it was judged."""

    shape: Any
    dtype: str
    seed: int
    values: str = "normal"
    why: str = ""
    launches: int = 0              # reported by the (untrusted) runner: diagnostics only
    kernels_off: str = ""          # "all" / "partial" when this case also had a kernels-off call
    flipped: bool = False          # run with the added device-kind tests flipped to their CUDA side (flip.py)


class Verdict(BaseModel):
    """The judge's answer for one candidate. ``passed`` is only ever set by the trusted judge."""

    candidate_id: str
    passed: bool
    klass: str | None = None      # rejection class (mismatch, torch_compute, timeout, segfault, ...)
    reason: str = ""
    backend: str
    checks: int = 0
    records: list[CheckRecord] = Field(default_factory=list)
    #: the checks that ran, in the order they ran; on a rejection the one that decided is marked
    #: ``[decided: CLASS]`` (``trail.decided_trail``; ``decided_by`` names it)
    ran: list[str] = Field(default_factory=list)
    decided_by: str = ""
    coverage: list[str] = Field(default_factory=list)  # cases, dropped cases, added branches (verify/plan/cases.py)
    seconds: float = 0.0          # the job's wall time (start-up, imports, compiles, waits included)
    device_s: float = 0.0         # of which the job held the device (tools/exec/gpulock.py phases)
    #: the judge's seconds per step of this candidate's checks (``judge.candidate.STEPS``: runner start, lock wait,
    #: held, inputs, staging, calls, comparisons); empty where no judge ran (the static policy)
    steps: dict[str, float] = Field(default_factory=dict)
    speed_measured: bool = False
    #: "full": every check of the plan; "screen": the listed shapes only (before timing: verify/staged.py),
    #: which no report calls verified; "noop": nothing ran (``verify.interface.NoopVerifier``), never verified either
    scope: Literal["full", "screen", "noop"] = "full"


class VariantTiming(BaseModel):
    """One variant on one bench shape (the bench job's per-variant entry)."""

    median_ms: float
    round_medians_ms: list[float]
    spread: float
    calls_per_round: int
    host_us_per_call: float | None = None
    pad_us: float | None = None          # the spin before each call, from the initial kernel's host time (bench.Timer)
    roofline_fraction: float | None = None
    achieved_bytes_per_s: float | None = None
    achieved_flops_per_s: float | None = None
    impossible: bool = False


class HardwareCheck(BaseModel):
    """ncu's kernel durations of the initial and the best kernel, against the claimed speedup."""

    claimed: float
    measured: float | None = None     # initial / best, from summed gpu__time_duration per call
    initial_ns_per_call: float | None = None
    best_ns_per_call: float | None = None
    confirmed: bool = False
    note: str = ""
    best_kernels: list[str] = Field(default_factory=list)
    #: per measured kernel ("initial", "best"): seconds of its ncu runner (``hwcheck._profile``: start_s
    #: outside the profiler lock, lock_wait_s, lock_s held) and whether it was preloaded
    ncu_seconds: dict[str, dict] = Field(default_factory=dict)
    #: the bench case it measured at (``timing.claim_case``), as the hwcheck job answered
    shape: Any = None
    dtype: str | None = None
    #: seconds its hwcheck jobs held the device (the initial kernel's half counted by the first check that used it)
    device_seconds: float = 0.0
