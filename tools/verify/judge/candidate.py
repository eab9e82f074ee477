"""The ``Judge``: one candidate's checks, in the judge job (``job.py``: trusted, runs in a sandboxed worker, never
imports candidate code).

It loads the ORIGINAL task (the user's own code: its reference may launch the original's Triton
kernels), plans the check cases (``cases.plan_checks``: seeds drawn here), makes each case's
inputs, computes the reference, and sends the inputs to the candidate's runner (``spawn.py``, a
separate sandboxed process started once for all cases). The runner sends back outputs as bytes
plus diagnostics; the comparison and every decision happen here. The verdict goes back to the
orchestrator sealed with a key only this process got (``seal.py``). Diagnostics of the runner can
only reject: a runner that sends nothing, exits 0 or crashes fails.

Per case: one watched call; a kernels-off call (every launch, or a random subset the judge picks,
given an empty grid: a "flag" kernel cannot tell which call skips which launch) in random order
after the group's first call; the runner writes each call's inputs into the same memory as the
group's earlier call (a ``data_ptr``-keyed cache returns stale values) and keeps the group's outputs
alive (an output sharing memory with an earlier one is a cache).
"""

from __future__ import annotations

import ast
import contextlib
import os
import random
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

import structlog
import torch

from tritondx.tools.exec.rejected import Rejected
from tritondx.tools.run.phases import Phases
from tritondx.tools.task.module import load_module, tolerance, to_dtype
from tritondx.tools.verify.judge.call_checks import check_diag, check_ops
from tritondx.tools.verify.judge.case_data import CaseData
from tritondx.tools.verify.plan.cases import plan_checks
from tritondx.tools.verify.judge.compare import compare, is_constant, left_as_passed, unchanged
from tritondx.tools.verify.judge.contract import OriginalContract
from tritondx.tools.verify.judge.coverage import trace_decides, trace_verdict
from tritondx.tools.verify.plan.evaluator import state_names
from tritondx.tools.verify.plan.flip import credit, flip_branches, flip_cases, flipped_source
from tritondx.tools.verify.runner.guard import ALLOWED_OPS, HOST_READ_PREFIX
from tritondx.tools.verify.judge.probe import device_phase
from tritondx.tools.verify.judge.spawn import RunnerDied, RunnerProcess, become_subreaper
from tritondx.tools.verify.judge.trail import (
    COVERAGE,
    FLIP,
    IMPORT,
    KERNELS_OFF,
    LAYOUT,
    MUTATION,
    PLAN,
    STALE,
    STATE,
    STREAMED,
    TRACE,
    VALUES,
    decided_trail,
)

log = structlog.get_logger()


#: the judge's steps per candidate (``Judge.steps``, seconds): starting the runner (``runner``), waiting for the device
#: (``lock_wait``), holding it (``held``: all of the following), each case's inputs and reference (``inputs``: made
#: once per case for every candidate of a round), staging the inputs in the runner (``stage``, device given back), the
#: runner's calls (``calls``: of which ``aside_compiling`` and ``aside_answers`` with the device given back), the
#: comparisons (``compare``)
STEPS = ("runner", "lock_wait", "held", "inputs", "stage", "calls", "aside_compiling", "aside_answers", "compare")
#: longest random skip mask of a partial kernels-off call
MASK_LEN = 64


#: how a candidate fails a derived case that may be the original's failure too (then the case is
#: outside the original's contract): wrong values, a raise or a kernel that does not compile at that size
#: (``tl.arange`` of a size that is no power of 2), or its runner ended (a crash, an illegal access)
CONTRACT_CLASSES = frozenset({"mismatch", "exception", "compile_error", "out_of_bounds", "segfault", "illegal_memory_access",
                              "crashed", "killed", "error", "out_of_memory"})


def _internal_overlap(t: torch.Tensor) -> bool:
    fn = getattr(torch._C, "_debug_has_internal_overlap", None)
    return t.numel() > 1 and fn is not None and fn(t) == 1


class Judge:
    def __init__(self, job: dict[str, Any], orig=None, cases: list | None = None, data: CaseData | None = None,
                 pool=None, contract: OriginalContract | None = None) -> None:
        """One candidate's checks. A round's judge (``verify_round``) hands every candidate the same
        loaded original, cases and case data, and a runner pool (``warm.py``); alone, it makes its own."""
        self.job = job
        self.device = job["device"]
        self.orig = orig if orig is not None else load_module(job["task"], "orig")
        self.allowed = set(job.get("allowed_ops", []))
        self.rng = random.Random(secrets.randbits(64))
        self.records: list[dict] = []
        self.lines: set[int] = set()   # candidate lines the runner saw run (untrusted: used against it)
        self.flip_lines: list[tuple[str, set[int]]] = []   # per flipped case: its label, the lines that ran
        self.flipped = 0                 # flipped cases checked (flip.py)
        self.widened: list[str] = []     # outputs within tolerance only with the reference's sensitivity added
        self.spots: set[tuple] = set()   # instruction positions the runner saw run on conditional expressions
        self.cases = cases
        self.data = data or CaseData(self.orig, self.device)
        self.pool = pool
        self.contract = contract
        self.evidence: list[str] = []
        self._case = None     # the case being checked (a failure on it may be outside the original's contract)
        self.steps = Phases()   # seconds per step of the checks (``STEPS``), reported with the verdict
        self.trail: list[str] = []       # the checks that ran, in the order they first ran (``ran``)
        self.state: dict[str, str] = {}  # module-level names launch() changed (the runner's) -> the first call
        self.state_exempt: set[str] = set()   # state the original keeps too (by name): not the candidate's addition

    def _ran(self, *names: str) -> None:
        for n in names:
            if n not in self.trail:
                self.trail.append(n)

    def planned(self) -> list[str]:
        """The plan's summary (cases, dropped cases, branches, per-dimension sizes), for a rejection too."""
        plan = getattr(self, "plan", None)
        return plan.summary() if plan is not None else []

    def rejected_trail(self, klass: str) -> list[str]:
        """The checks run, in order, the one that decided this rejection marked (``decided_trail``)."""
        return decided_trail(self.trail, klass)

    def run(self) -> dict[str, Any]:
        cases = self.cases
        self.plan = None
        orig_src = Path(self.job["task"]).read_text()
        try:
            self.state_exempt = state_names(ast.parse(orig_src))
        except SyntaxError:
            self.state_exempt = set()
        self._ran(PLAN)
        if cases is None:
            cand_src = Path(self.job["candidate"]).read_text()
            # listed shapes, derived sizes, both sides of every added branch, value stress; fresh seeds
            self.plan = plan_checks(self.orig, orig_src, cand_src, self.device,
                                    include_bench=bool(self.job.get("include_bench")),
                                    scope=self.job.get("scope") or "full")
            cases = self.plan.cases
        if not cases:
            raise Rejected("no_checks", "the check planner gave no cases: nothing would be verified")
        become_subreaper()
        own_contract = self.contract is None
        if own_contract:
            self.contract = OriginalContract(self.job["task"], self.orig, self.device, [os.getcwd()])
        try:
            self._check(cases, self.job["candidate"])
            self._state_check()
            if self.plan is not None:   # the CUDA side of added device-kind tests, on a non-CUDA device
                self._ran(COVERAGE)
                unchecked = self.plan.rejection()
                if unchecked:   # rejected anyway: no flipped cases to run
                    raise Rejected(*unchecked)
                if flip_branches(self.plan.branches, self.device):
                    self._ran(FLIP)
                self._flipped()
                self._state_check()   # the flipped runner's calls too
        finally:
            if own_contract:
                self.contract.close()
        evidence = self.evidence
        self._ran(STREAMED)
        streamed = sorted({op for op in evidence if op} - self._allowed_all())
        if any(op.startswith(HOST_READ_PREFIX) for op in streamed):
            raise Rejected("host_compute", f"the recorder streamed host reads of tensor data {streamed[:6]}")
        if streamed:
            raise Rejected("torch_compute", f"the recorder streamed torch compute ops {streamed[:6]} "
                                            "(outputs must come from Triton kernels)")
        # every case passed; an added branch side no case reached still leaves code unchecked
        if self.plan is not None:
            self._ran(COVERAGE)
        unchecked = self.plan.rejection() if self.plan is not None else None
        if unchecked:
            raise Rejected(*unchecked)
        if self.plan is not None:  # branches the judge could not evaluate: the runner's line trace, against it
            if any(bc.status == "dynamic" for bc in self.plan.branches):
                self._ran(TRACE)
            traced = trace_verdict(self.plan.branches, self.lines, spots=self.spots,
                                   kernel_lines_traced=self._kernel_lines_traced())
            if traced:
                raise Rejected("unchecked_branch", "; ".join(traced[:3])[:600])
        return {"passed": True, "checks": self.records, "ran": self.ran(),
                "coverage": self.plan.summary() if self.plan is not None else [],
                "scope": self.plan.scope if self.plan is not None else "full"}

    def _note_state(self, diag: dict, where: str) -> None:
        """Module-level names a call changed (the runner's ``StateWatch``), kept with the first call that did."""
        for name in diag.get("state") or []:
            if isinstance(name, str) and name.split(".")[0] not in self.state_exempt:
                self.state.setdefault(name[:120], where)

    def _state_check(self) -> None:
        """State across calls (issue 34): a launcher whose calls change module-level state the original does not
        keep (a call counter in a list, a dict of seen shapes, an attribute added to torch) may compute differently
        on later calls than on the ones checked here (a benchmark times hundreds). Rejected: its checked calls do
        not speak for its other calls."""
        self._ran(STATE)
        if self.state:
            names = sorted(self.state)
            first = self.state[names[0]]
            raise Rejected("state_across_calls", f"launch() changed module-level state across calls "
                                                 f"({', '.join(names[:6])}; first on {first}): a call may compute "
                                                 "differently from the calls checked (a counter, a cache); a "
                                                 "launcher keeps no state the original does not keep")

    @contextlib.contextmanager
    def _held(self):
        """The device held (shared) for one step of a case: a timer of another job waits for one case's device work
        at most, not a group's; the memory goes back at the group's end (``_check``)."""
        t0 = time.monotonic()
        with device_phase(self.device, release=False):
            self.steps.add("lock_wait", time.monotonic() - t0)
            with self.steps.time("held"):
                yield

    def step_seconds(self) -> dict[str, float]:
        """Where this candidate's checks spent their time (``STEPS``), in seconds."""
        return dict(self.steps.seconds)

    def _runner_seconds(self, runner) -> None:
        for k, v in runner.seconds.items():
            self.steps.add(f"aside_{k}", v)

    def _check(self, cases: list, candidate: str, flip: bool = False) -> None:
        """Every case on one runner of ``candidate`` (``flip``: the flipped source, see flip.py)."""
        runner = zygote = None
        try:
            with self.steps.time("runner"):
                runner, zygote = self._new_runner(candidate, flip)
            self._ran(IMPORT)
            self._hello(runner.hello)
            groups: dict[tuple, list] = {}
            for c in cases:
                groups.setdefault((c.dtype, repr(c.shape), c.values), []).append(c)
            for group in groups.values():
                self._case = None
                try:
                    try:
                        self._group(runner, group)
                    finally:
                        with device_phase(self.device):   # the group's device memory given back (a short hold)
                            pass
                    runner.reset()
                except (Rejected, RunnerDied) as exc:
                    died = isinstance(exc, RunnerDied)
                    rej = Rejected(exc.kind, exc.message) if died else exc
                    if not self._outside_contract(self._case, rej):
                        raise rej from None
                    if died:   # the candidate's runner ended on a case the original fails too: a fresh one
                        self._runner_seconds(runner)
                        self.evidence += runner.close()
                        self._release(zygote)
                        runner, zygote = self._new_runner(candidate, flip)
                        self._hello(runner.hello)
                    else:
                        runner.reset()
        except RunnerDied as exc:
            raise Rejected(exc.kind, exc.message) from None
        finally:
            if runner is not None:
                self._runner_seconds(runner)
                self.evidence += runner.close()
                self._release(zygote)

    def _flipped(self) -> None:
        """The device flip (flip.py): the added device-kind tests as constants of their CUDA side, on a
        runner of their own, over the flipped cases; each CUDA side must run in one of them."""
        targets = flip_branches(self.plan.branches, self.device)
        if not targets:
            return
        at = ", ".join(str(bc.branch.line) for bc in targets)
        try:
            source = flipped_source(Path(self.job["candidate"]).read_text(), targets)
        except (ValueError, SyntaxError) as exc:
            raise Rejected("unchecked_branch", f"the device-kind test(s) at line(s) {at} could not be flipped "
                                               f"to their CUDA side ({exc}): that side is not verified") from None
        cases = flip_cases(self.plan.cases, list(dict.fromkeys(c.dtype for c in self.plan.cases)))
        self.plan.cases += cases
        with tempfile.TemporaryDirectory(prefix="tritondx-judge-flip-") as d:
            path = Path(d) / "candidate.py"
            path.write_text(source)
            try:
                self._check(cases, str(path), flip=True)
            except Rejected as exc:
                raise Rejected(exc.klass, f"the CUDA side of the device-kind test(s) at line(s) {at} failed under "
                                          f"the device flip: {exc.reason}") from None
        problems = credit(targets, self.flip_lines)
        if problems:
            raise Rejected("unchecked_branch", "; ".join(problems[:3])[:600])
        self.flipped = len(cases)
        log.info("device_flip", candidate=self.job["candidate"], lines=at, cases=len(cases))

    def _new_runner(self, candidate: str, flip: bool = False):
        try:
            if self.pool is not None:
                runner, zygote = self.pool.runner(candidate, sorted(self.allowed), flip=flip)
            else:
                runner, zygote = RunnerProcess(candidate, self.device, sorted(self.allowed),
                                               hide=[os.getcwd()], flip=flip), None
        except RunnerDied as exc:
            raise Rejected(exc.kind, exc.message) from None
        self.runner = runner
        return runner, zygote

    def _release(self, zygote) -> None:
        if self.pool is not None:
            self.pool.release(zygote)

    def _outside_contract(self, case, exc: Rejected) -> bool:
        """A derived case the candidate fails (wrong values, or its process ended) that the original
        kernel fails too (``contract.py``: run in a process of its own) checks nothing a candidate can
        be held to: it is dropped from the plan, with the original's result, and the checks go on."""
        if case is None or self.plan is None or case.why.startswith("listed") \
                or exc.klass not in CONTRACT_CLASSES or self.contract is None:
            return False
        snapshot, refs, _ = self.data.get(case, case.label())
        problem = self.contract.check(case.shape, case.dtype, case.values, tuple(snapshot), refs)
        if problem is None:
            return False
        self.plan.drop(case, f"{case.why}: the candidate failed it ({exc.klass}) and so does the original "
                             f"kernel: outside its contract ({problem})")
        log.info("case_outside_contract", case=case.label(), candidate_failure=exc.klass, original=problem[:120])
        return True

    def ran(self) -> list[str]:
        """The checks that ran, in the order they first ran (``trail``), with what the device flip and the widened
        comparison add."""
        return [t if t != FLIP else f"device flip ({self.flipped} cases with the added device-kind tests at their "
                                    f"CUDA value)" for t in self.trail if t != FLIP or self.flipped] + \
            ([f"within tolerance only with the reference's own rounding sensitivity added (ill-conditioned "
              f"elements, compare.sensitivity): {'; '.join(self.widened[:3])}"
              + (f" and {len(self.widened) - 3} more" if len(self.widened) > 3 else "")] if self.widened else [])

    def _allowed_all(self) -> set[str]:
        return set(ALLOWED_OPS) | self.allowed

    def _hello(self, hello: dict) -> None:
        if not isinstance(hello, dict) or not hello.get("ok"):
            err = (hello or {}).get("error", "no answer") if isinstance(hello, dict) else "malformed answer"
            raise Rejected("import_error", f"importing the candidate failed: {err}")
        if hello.get("tampered"):
            raise Rejected("timing_tampering", f"importing the candidate replaced {', '.join(hello['tampered'])}")
        if hello.get("threads"):
            raise Rejected("threads", f"importing the candidate started Python thread(s) {hello['threads'][:3]}")

    def _kernel_lines_traced(self) -> bool:
        return not self.device.startswith("cuda")   # interpreted kernel bodies run as the candidate's lines

    def _wants_trace(self, case) -> bool:
        """Whether the plain call of ``case`` asks the runner for its line trace: a flipped case (its
        lines credit the CUDA sides: ``flip.credit``), or any case of a plan with a branch the trace
        decides (``coverage.trace_decides``). Never the kernels-off call. The trace only ever counts
        against the candidate, and a call without one adds no line: nothing is reached by it."""
        if case.flipped:
            return True
        kernel_lines = self._kernel_lines_traced()
        return self.plan is not None and any(trace_decides(bc, kernel_lines) for bc in self.plan.branches)

    def _group(self, runner: RunnerProcess, group: list) -> None:
        earlier_refs: list[tuple[int, tuple]] = []
        for k, case in enumerate(group):
            self._case = case
            dtype = to_dtype(case.dtype)
            where = f"{case.label()} seed {case.seed}"
            with self._held():
                with self.steps.time("inputs"):   # made once per case for all candidates (CaseData)
                    snapshot, refs, ref_aliases = self.data.get(case, where)
            # the inputs' bytes cross the pipe once, between the holds (CPU only: a 512 MiB input took seconds of a
            # hold every timer of a batch waits for); each call rebuilds its own copy (``call(staged="case")``)
            with self.steps.time("stage"):
                runner.stage_case(list(snapshot))
            # the group's first call is a plain one (compiles, autotuning); later cases put the
            # kernels-off call before or after the plain one at random
            off_first = k > 0 and self.rng.random() < 0.5
            mode = "all" if self.rng.random() < 0.5 else "partial"
            mask = [self.rng.random() < 0.5 for _ in range(MASK_LEN)] if mode == "partial" else []
            traced = self._wants_trace(case)

            def kernels_off() -> dict:
                return runner.call([], mask, skip_rest=mode == "all", inputs_back=False, staged="case")
            with self._held():   # the calls and their checks
                with self.steps.time("calls"):
                    off = kernels_off() if off_first else None
                    ans = runner.call([], trace=traced, staged="case")
                    if off is None:
                        off = kernels_off()
                diag = ans.get("diag") or {}
                self._note_state(diag, where)
                self._note_state(off.get("diag") or {}, where + " (kernels-off call)")
                if traced:   # lines a runner sends unasked are never read
                    ran = {x for x in diag.get("lines") or [] if isinstance(x, int)}
                    self.lines |= ran
                    self.spots |= {tuple(p) for p in diag.get("positions") or []
                                   if isinstance(p, list) and len(p) == 4 and all(isinstance(v, int) for v in p)}
                    if case.flipped:
                        self.flip_lines.append((case.label(), ran))
                check_diag(diag, where, self.allowed, self._ran)
                self._ran(MUTATION)
                for i, (t, s) in enumerate(zip(ans.get("inputs_after") or [], snapshot)):
                    if isinstance(s, torch.Tensor) and (not isinstance(t, torch.Tensor) or t.shape != s.shape
                                                        or t.dtype != s.dtype or not unchanged(t, s)):
                        raise Rejected("mutates_inputs", f"{where}: input {i} was modified by launch()")
                off_diag = off.get("diag") or {}
                if off_diag.get("tampered"):
                    raise Rejected("timing_tampering", f"{where}: launch() replaced {', '.join(off_diag['tampered'])}")
                check_ops(off_diag, where, self.allowed, self._ran)
                with self.steps.time("compare"):
                    self._outputs(ans, off, refs, ref_aliases, mask, mode, earlier_refs, where, dtype,
                                  self.data.atol_scales(case), lambda: self.data.floors(case), tuple(snapshot))
                earlier_refs.append((case.seed, refs))
                self.records.append({**case.model_dump(), "launches": diag["launches"], "kernels_off": mode})

    def _outputs(self, ans: dict, off: dict, refs: tuple, ref_aliases: list, mask: list, mode: str,
                 earlier_refs: list, where: str, dtype: torch.dtype, atol_scales: list[float] = (),
                 floors=None, inputs: tuple = ()) -> None:
        outs, layout = ans.get("outs"), (ans.get("diag") or {}).get("layout") or []
        if not isinstance(outs, list):
            raise Rejected("wrong_output", f"{where}: the candidate sent no outputs")
        if len(outs) != len(refs):
            raise Rejected("wrong_output", f"{where}: launch() returned {len(outs)} outputs, reference {len(refs)}")
        launches = ans["diag"]["launches"]
        # a kernels-off call that really skipped something: every launch, or >= 1 of those the plain call made
        # A kernels-off call proves "not from Triton" only when no launch of it ran: with a random
        # subset skipped, an honest kernel's output can stay right when the skipped launch did not
        # write it (several launches, several outputs). The random subset still hides from a flag
        # kernel which call is which; host reads of a flag are recorded by the runner.
        off_launches = int((off.get("diag") or {}).get("launches") or 0)
        off_skipped = mode == "all" or (0 < off_launches <= len(mask) and all(mask[:off_launches]))
        off_outs = off.get("outs") if isinstance(off.get("outs"), list) else []
        for i, (o, r) in enumerate(zip(outs, refs)):
            lay = layout[i] if i < len(layout) and isinstance(layout[i], dict) else {}
            self._ran(LAYOUT)
            if not isinstance(o, torch.Tensor) or lay.get("type") != "Tensor":
                raise Rejected("lazy_output", f"{where}: output {i} is {lay.get('type', type(o).__name__)}, "
                                              "not a plain torch.Tensor")
            if isinstance(r, torch.Tensor):
                r = r.to(o.device)   # every comparison of this output where the answers are (compare.py)
            if lay.get("aliases_input") and not ref_aliases[i]:
                raise Rejected("aliased_output", f"{where}: output {i} aliases an input's memory")
            if lay.get("internal_overlap") and not _internal_overlap(r):
                raise Rejected("aliased_output", f"{where}: output {i} is an expanded/overlapping view "
                                                 f"(strides {tuple(o.stride())}): elements share memory, "
                                                 "so it was not computed element by element")
            self._ran(STALE)
            if lay.get("shares_earlier"):
                raise Rejected("caches_outputs", f"{where}: output {i} shares memory with an output of an "
                                                 "earlier call (a cached or reused output; launch() must "
                                                 "return fresh tensors)")
            if lay.get("device") != torch.device(self.device).type:
                raise Rejected("wrong_output", f"{where}: output {i} is on {lay.get('device')}, want {self.device}")
            self._ran(VALUES)
            atol, rtol = tolerance(self.orig, dtype, output=i)   # per-output tolerances where the task gives them
            atol *= atol_scales[i] if i < len(atol_scales) else 1.0   # value stress (CaseData._atol_scales)
            bad = compare(o, r, atol, rtol)
            if bad and floors is not None and isinstance(r, torch.Tensor) and r.is_floating_point():
                per_output = floors()   # the reference's own rounding sensitivity (made once per case)
                floor = per_output[i] if i < len(per_output) else None
                if floor is not None:
                    bad = compare(o, r, atol, rtol, floor=floor)
                    if bad is None:
                        self.widened.append(f"{where}: output {i}")
            if bad:
                for old_seed, old_refs in earlier_refs:
                    if i < len(old_refs) and compare(o, old_refs[i], atol, rtol) is None:
                        raise Rejected("caches_outputs", f"{where}: output {i} equals the reference of an earlier "
                                                         f"call (seed {old_seed}), not of this one: a stale or "
                                                         "cached output")
                raise Rejected("mismatch", f"{where}: output {i}: {bad['reason']}")
            self._ran(KERNELS_OFF)
            oo = off_outs[i] if i < len(off_outs) else None
            off_lay = (off.get("diag") or {}).get("layout") or []
            if i < len(off_lay) and isinstance(off_lay[i], dict) and off_lay[i].get("shares_earlier"):
                raise Rejected("caches_outputs", f"{where}: output {i} of the kernels-off call shares memory with "
                                                 "an output of an earlier call (a cached or reused output; launch() "
                                                 "must return fresh tensors)")
            # an untouched fill (a constant, or a destination as passed in: the prefilled case) that the kernels
            # changed is the kernels' output, even where the task's tolerance cannot tell that fill from the
            # reference (int8 values with atol 1 beside fp16 scales of ~0.02 under the same entry: every kernel
            # that writes the scales was rejected, the original too)
            untouched = left_as_passed(oo, o, inputs)
            if off_skipped and isinstance(oo, torch.Tensor) and not ref_aliases[i] and not is_constant(r) \
                    and not untouched and compare(oo, r, atol, rtol) is None:
                which = "every Triton launch" if mode == "all" else "a random subset of its Triton launches"
                raise Rejected("not_from_triton", f"{where}: output {i} is still correct when no Triton kernel "
                                                  f"body runs ({which} given an empty grid): it was computed "
                                                  "outside Triton kernels (numpy, Python or unrecorded torch)")
