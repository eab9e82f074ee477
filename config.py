"""Run configuration: one pydantic model, read from CLI arguments and the environment."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, Field


ENV_KNOBS = {
    "candidates_per_round": "TRITONDX_CANDIDATES_PER_ROUND",
    "untimed_per_family": "TRITONDX_UNTIMED_PER_FAMILY",
    "untimed_repeat_families": "TRITONDX_UNTIMED_REPEAT",
    "verify_timeout_s": "TRITONDX_VERIFY_TIMEOUT",
    "verify_parallel": "TRITONDX_VERIFY_PARALLEL",
    "bench_timeout_s": "TRITONDX_BENCH_TIMEOUT",
    "ncu": "TRITONDX_NCU",
    "final_profile": "TRITONDX_FINAL_PROFILE",
    "accept_unmeasured": "TRITONDX_ACCEPT_UNMEASURED",

    "tune": "TRITONDX_TUNE",
    "wall_budget_s": "TRITONDX_WALL_BUDGET",
    "tune_budget_s": "TRITONDX_TUNE_BUDGET",
    "finish_by": "TRITONDX_FINISH_BY",
    "verify_screen": "TRITONDX_VERIFY_SCREEN",
    "full_verify_top": "TRITONDX_FULL_VERIFY_TOP",
    "rewrites_beside_tune": "TRITONDX_REWRITES_BESIDE_TUNE",
    "tune_candidates": "TRITONDX_TUNE_CANDIDATES",
    "verifier": "TRITONDX_VERIFIER",
}


class RunConfig(BaseModel):
    mode: Literal["optimize", "diagnose"] = "optimize"
    backend: str = Field("auto", description="auto, interpreter, cuda or npu")
    target: str | None = Field(None, description="IR target, e.g. cuda:90 or ascend950; default from the backend")
    max_rounds: int = Field(6, description="rewrite rounds in all tiers together")
    candidates_per_round: int = 4

    tune: bool = Field(True, description="the tuner: time many launch configurations of each new best version in "
                                         "one job and verify only the winners (tools/tune)")
    tune_budget_s: float = Field(45.0, description="seconds of one tune job's search (after its set-up)")
    rewrites_beside_tune: int = Field(2, description="on a backend that times, when the tuner found winners: this "
                                                     "many structural rewrites of the best winner that the evidence "
                                                     "suggests join the same round (screened and timed beside the "
                                                     "winners) instead of waiting for a round of their own")
    tune_candidates: bool = Field(True, description="on a backend that times: each structural candidate's launch "
                                                    "configuration searched (its own short tune job) before it is "
                                                    "verified; siblings that differ only in numbers are dropped")
    untimed_per_family: int = Field(1, description="on a backend that cannot time kernels (the interpreter): "
                                                   "candidates per rewrite family and round (variants that differ "
                                                   "only in tuning values cannot be told apart without timing)")
    untimed_repeat_families: bool = Field(False, description="on a backend that cannot time kernels: propose a "
                                                             "family again in a later round after one of its "
                                                             "candidates passed (its variants differ in tuning "
                                                             "values, which nothing here can compare)")
    max_rounds_per_tier: int = 2
    target_fraction: float = Field(0.8, description="stop when the best kernel reaches this roofline fraction")
    min_gain: float = Field(1.05, description="a round must improve the best time by this factor to stay in a tier")
    wall_budget_s: float | None = Field(None, description="stop after the round that ends past this many seconds of "
                                                          "the run's nodes (a batch that must end in time)")
    gpu_budget_s: float = Field(900.0, description="device seconds (verify + bench jobs) for the whole run")
    finish_by: float | None = Field(None, exclude=True,   # this process's deadline: not saved with the run
                                    description="a time (epoch seconds) the run ends by, set by a batch from its "
                                                "deadline: no round starts that cannot end before it, and the "
                                                "tuner's search shrinks to fit")
    verifier: Literal["judge", "noop"] = Field("judge", description="who checks the candidates: the trusted judge, "
                                               "or 'noop' (nothing runs, nothing is called verified): for the tests "
                                               "of what surrounds the judge (tools/verify/interface.py)")
    verify_timeout_s: float = 600.0
    bench_timeout_s: float = 900.0
    bench_rounds: int = 3
    ncu: bool = Field(True, description="read hardware counters with Nsight Compute in the profile tier")
    final_profile: bool = Field(True, description="after the search, read the counters of initial and best with "
                                                  "Nsight Compute for the report (cuda, when ncu is installed)")
    verify_parallel: int = Field(4, description="candidates verified at once, each in its own process")
    verify_screen: bool = Field(True, description="on a backend that times: check every candidate on the listed "
                                                  "shapes, time the survivors, and run the full checks only on "
                                                  "those that would win (tools/verify/staged.py)")
    full_verify_top: int = Field(3, description="with verify_screen: how many of the fastest candidates that beat "
                                                "the best get the full checks in a round")
    all_tiers: bool = Field(False, description="gather every tier's evidence before the first rewrite (ablation)")
    stop_after_tier: str | None = Field(None, description="never escalate past this tier (ablation)")
    llm: bool = False
    llm_base_url: str | None = None
    llm_model: str | None = None
    interactive: bool = False
    baselines: bool = Field(False, description="also time torch eager and torch.compile on the bench shapes")
    accept_unmeasured: bool = Field(False, description="without a timing backend, take the first verified "
                                                       "candidate (catalog priority order) as the result instead "
                                                       "of keeping the initial kernel (tools/verify/select_untimed.py)")

    @classmethod
    def from_env(cls, **overrides) -> "RunConfig":
        env = {}
        if os.environ.get("TRITONDX_BACKEND"):
            env["backend"] = os.environ["TRITONDX_BACKEND"]
        if os.environ.get("TRITONDX_MAX_ROUNDS"):
            env["max_rounds"] = int(os.environ["TRITONDX_MAX_ROUNDS"])
        # Knobs for long unattended runs (and for fast tests): field <- environment variable.
        for field, var in ENV_KNOBS.items():
            if os.environ.get(var):
                env[field] = os.environ[var]  # pydantic converts and validates
        env.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**env)


class RunContext(BaseModel):
    """What the caller of one graph invocation gives every node through LangGraph's runtime context
    (``StateGraph(..., context_schema=RunContext)``; ``graph.stream(..., context=RunContext(...))``; a node's
    ``runtime`` argument): the run's settings and its clock. Not state: a resumed, replayed or forked run is given
    them again (from ``run.json``), and a checkpoint holds no configuration."""

    #: the run's settings (a run started through the LangGraph API without a context: the defaults)
    config: RunConfig = Field(default_factory=RunConfig)

    #: when this invocation's wall time starts (epoch seconds; the CLI's imports count for a first run). Without
    #: it (a run started through the LangGraph API) the report's wall time is the nodes' own seconds.
    started_at: float | None = None
