"""The judge's checks by name, in the order a candidate meets them (``Judge.trail``; issue 34), and which one
decided a rejection (``decided_trail``): the ``ran`` list of a verdict."""

from __future__ import annotations

from tritondx.tools.records.verify import DECIDED


PLAN = "case plan (listed shapes, derived sizes per dimension, branch sides, value stress; fresh seeds per call)"
IMPORT = "candidate import (timing functions, threads)"
CALL_OK = "launch() ran without error"
LAUNCHES = "launch count"
STREAM = "side stream"
THREADS = "threads"
OPS = "torch op recorder (all threads)"
TIMING = "timing functions"
HOOKS = "launch hooks"
MUTATION = "input mutation"
LAYOUT = "output layout"
VALUES = "values vs reference (judge)"
STALE = "stale / cached outputs"
KERNELS_OFF = "kernels-off (all / random subset)"
STATE = "state across calls (module-level state launch() changed)"
STREAMED = "streamed op evidence"
COVERAGE = "branch coverage (every side of an added branch reached)"
TRACE = "line trace (dynamic branch sides run)"
FLIP = "device flip"
RUNNER = "runner process (crash, memory, time limit)"
#: the check a rejection class comes from (a class no entry names: the check that ran last)
DECIDES = {"exception": CALL_OK, "compile_error": CALL_OK, "out_of_bounds": CALL_OK, "illegal_memory_access": CALL_OK,
           "out_of_memory": CALL_OK, "no_triton_kernel": LAUNCHES, "side_stream": STREAM, "threads": THREADS,
           "torch_compute": OPS, "host_compute": OPS, "timing_tampering": TIMING, "verifier_tampering": HOOKS,
           "import_error": IMPORT, "mutates_inputs": MUTATION, "lazy_output": LAYOUT, "aliased_output": LAYOUT,
           "wrong_output": LAYOUT, "mismatch": VALUES, "caches_outputs": STALE, "not_from_triton": KERNELS_OFF,
           "state_across_calls": STATE, "segfault": RUNNER, "crashed": RUNNER, "killed": RUNNER, "timeout": RUNNER,
           "no_result": RUNNER, "no_checks": PLAN}


def decided_trail(trail: list[str], klass: str) -> list[str]:
    """``trail`` (the checks run, in order) with the one that decided a rejection of class ``klass`` marked:
    the class's own check (``DECIDES``) where it ran, else the last check run."""
    trail = list(trail) or [PLAN]
    which = DECIDES.get(klass)
    i = trail.index(which) if which in trail else len(trail) - 1
    if which is not None and which not in trail:
        trail.append(which)
        i = len(trail) - 1
    trail[i] += DECIDED.format(klass=klass)
    return trail
