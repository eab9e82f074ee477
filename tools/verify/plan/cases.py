"""Which checks a candidate gets: the one seam the trusted judge reads its case list from.

``plan_checks`` looks at the task (its listed shapes, dtypes, ``make_inputs`` and ``reference``),
the original's source and the candidate's source (read, never imported) and returns a
:class:`CasePlan`: the cases to run (fresh seeds from :mod:`secrets`), the derived cases it dropped
and why, and per branch the candidate adds, which case reaches each side (or why none does).

Cases beyond ``CHECK_SHAPES``: an odd size that is no multiple of any block constant, a size larger
than every listed one (within the device's budget), sizes on both sides of every constant an added
branch compares against (solved by evaluating the candidate's launcher over its AST on each size
tried), value stress for reduction-like originals, and a prefilled destination buffer. Every
derived shape is built with ``make_inputs``, run through the reference and the original launcher's
asserts (evaluated, not run); one that any of them rejects is dropped with the reason.
"""

from __future__ import annotations

import ast
import secrets
from typing import Any, Literal

import torch
from pydantic import BaseModel, Field

from tritondx.tools.task.module import as_tuple, dtype_name, norm_shape, to_dtype
from tritondx.tools.verify.plan import shapes as sh
from tritondx.tools.verify.plan.branches import Branch, added_branches
from tritondx.tools.verify.plan.launch_walk import Walk, walk_launch
from tritondx.tools.verify.plan.buffers import random_fill, written_buffers
from tritondx.tools.verify.plan.evaluator import reads_state, state_names
from tritondx.tools.verify.plan.stress import all_finite, apply_values, stress_kinds
from tritondx.tools.verify.plan.tiles import block_tiles, residue_sizes

#: seeds per listed shape and dtype (derived cases get one)
SEEDS_PER_LISTED = 2
#: at most this many extra shapes are chosen to reach the sides of added branches
MAX_BRANCH_SHAPES = 6
#: at most this many (block constant, dimension) pairs get their own sizes (3 each: remainders 1, block-1, block+1)
MAX_TILES = 4
#: sizes up to this many elements get real CPU inputs for the launcher's evaluation; larger ones meta
#: tensors (free at any size, but the first costs ~3 s of imports)
REAL_INPUTS_CAP = 1 << 16
#: how a case run with the device-kind tests flipped to their CUDA side is labelled (flip.py)
FLIPPED_LABEL = "flipped to the CUDA side"
#: the same for the many sizes of the branch search (evaluated only, on the inputs' model: shapes.InputModel)
POOL_REAL_INPUTS_CAP = 0


class CheckCase(BaseModel):
    shape: Any                       # a tuple of ints, or the task's sentinel (("small",))
    dtype: str                       # "float32"
    seed: int
    values: str = "normal"           # normal | large | tiny | huge | prefilled
    why: str
    flipped: bool = False            # run with the device-kind tests the candidate adds flipped (flip.py)

    def label(self) -> str:
        v = "" if self.values == "normal" else f" values {self.values}"
        return f"shape {self.shape} dtype {self.dtype}{v}" + (f" {FLIPPED_LABEL}" if self.flipped else "")


class DroppedCase(BaseModel):
    shape: Any
    dtype: str
    values: str = "normal"
    why: str


class BranchCoverage(BaseModel):
    branch: Branch
    reached: dict[str, str] = Field(default_factory=dict)   # "true"/"false" -> label of the first case
    status: Literal["covered", "unreached", "dynamic", "dead"] = "unreached"
    note: str = ""
    elsewhere: list[bool] = Field(default_factory=list)   # device-kind sides that run only on another device

    def line(self) -> str:
        b = self.branch
        sides = ", ".join(f"{k} by {v}" for k, v in sorted(self.reached.items())) or "no side"
        return f"{b.func} line {b.line} `if {b.test}` ({b.why}): {self.status}: {sides}" + \
               (f"; {self.note}" if self.note else "")


class CasePlan(BaseModel):
    cases: list[CheckCase]
    dropped: list[DroppedCase] = Field(default_factory=list)
    branches: list[BranchCoverage] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    scope: Literal["full", "screen"] = "full"

    def unchecked(self) -> list[BranchCoverage]:
        return [b for b in self.branches if b.status == "unreached"]

    def rejection(self) -> tuple[str, str] | None:
        """(class, reason) when a branch the candidate adds is reached by no checked case."""
        bad = self.unchecked()
        if not bad:
            return None
        return "unchecked_branch", "; ".join(b.line() for b in bad[:3])[:600]

    def drop(self, case: CheckCase, why: str) -> None:
        """Take a case out after the fact (the original kernel fails it too): its branch sides are
        unreached again unless another case reached them."""
        self.cases = [c for c in self.cases if c is not case]
        self.dropped.append(DroppedCase(shape=case.shape, dtype=case.dtype, values=case.values, why=why))
        label = case.label()
        for bc in self.branches:
            lost = [side for side, by in bc.reached.items() if by == label]
            if lost and not any(c.label() == label for c in self.cases):
                for side in lost:
                    del bc.reached[side]
                if bc.status == "covered":
                    bc.status = "unreached"
                    bc.note = (f"unreached: its {' and '.join(lost)} side was reached only by {label}, "
                               "outside the original kernel's contract")

    def summary(self) -> list[str]:
        return ([f"{c.label()} seed {c.seed}: {c.why}" for c in self.cases]
                + [f"dropped {d.shape} {d.dtype} {d.values}: {d.why}" for d in self.dropped]
                + [b.line() for b in self.branches] + self.notes)


def fresh_seed() -> int:
    return secrets.randbelow(1 << 30)


def make_case_inputs(task_mod: Any, case: CheckCase, device: str) -> tuple:
    """The inputs of one case: the task's ``make_inputs``, then the case's value stress (trusted side)."""
    inputs = as_tuple(task_mod.make_inputs(case.shape, to_dtype(case.dtype), case.seed, device))
    if case.values == "prefilled":
        for i in written_buffers(task_mod.reference, inputs):
            t = inputs[i]
            t.copy_(random_fill(t, case.seed + i))
        return inputs
    return apply_values(inputs, case.values)


def _meta_inputs(task_mod: Any, shape: Any, dtype: torch.dtype, cap: int) -> tuple | None:
    """Inputs for evaluating the launcher's arithmetic: real ones on the CPU for shapes within ``cap``
    elements (and sentinels), else on the meta device when make_inputs allows (no memory, any size;
    its first use imports torch's compiler stack, ~3 s, so only for sizes that need it)."""
    if not sh.is_int_shape(shape) or sh.numel(shape) <= cap:
        try:
            return as_tuple(task_mod.make_inputs(shape, dtype, 0, "cpu"))
        except Exception:  # noqa: BLE001 - task code
            return None
    try:
        with torch.device("meta"):
            return as_tuple(task_mod.make_inputs(shape, dtype, 0, "meta"))
    except Exception:  # noqa: BLE001 - e.g. make_inputs reads a value back (.item())
        return None


class _Planner:
    def __init__(self, task_mod: Any, original_source: str, candidate_source: str, device: str,
                 include_bench: bool, size_class: str | None):
        self.mod, self.device = task_mod, device
        self.size_class = size_class or sh.device_kind(device)   # "cpu" / "cuda": the size budget
        self.orig_src, self.cand_src = original_source, candidate_source
        self.orig_tree, self.cand_tree = ast.parse(original_source), ast.parse(candidate_source)
        self.listed = [norm_shape(s) for s in task_mod.CHECK_SHAPES]
        self.bench = [norm_shape(s) for s in getattr(task_mod, "BENCH_SHAPES", [])]
        if include_bench:
            self.listed += [s for s in self.bench if s not in self.listed]
        self.dtypes = [dtype_name(to_dtype(d)) for d in task_mod.DTYPES]
        # sizes are derived from CHECK_SHAPES only (benchmark shapes, when listed, are checked as they are)
        self.int_listed = [norm_shape(s) for s in task_mod.CHECK_SHAPES if sh.is_int_shape(norm_shape(s))]
        self.plan = CasePlan(cases=[])
        self.branches = [BranchCoverage(branch=b) for b in added_branches(original_source, candidate_source)]
        for bc in self.branches:
            device_sides(bc, self.device)
        self._walks: dict[tuple[str, str], Walk | None] = {}      # the candidate's launcher per size
        self._inputs: dict[tuple[str, str], tuple | None] = {}
        self.blocks = self._block_constants()
        self.state = state_names(self.cand_tree)   # module-level names a call may change (issue 34)
        self.tiles: list = []                      # block constants per dimension (tiles.py), once derived
        self.constants = set(self.blocks)   # sizes branch tests compare against (grown by the walks)
        self.beyond: dict[tuple[str, bool], tuple[int, ...]] = {}   # side -> first size past the budget
        self.exhausted: dict[str, bool] = {}                          # dtype -> the size search ran to its end
        self._models: dict[tuple[int, str], sh.InputModel | None] = {}
        self.unevaluated: set[str] = set()                            # dtypes with a size the search could not evaluate

    def _block_constants(self) -> set[int]:
        """Integer constants >= 8 in the candidate's functions (block sizes, specialization limits)."""
        out = set()
        for n in ast.walk(self.cand_tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool) \
                    and 8 <= n.value <= (1 << 24):
                out.add(n.value)
        return out

    # --- evaluation -----------------------------------------------------------------------------------
    def model(self, rank: int, dtype: str) -> sh.InputModel | None:
        """How this task's inputs follow a shape of ``rank`` (two small make_inputs calls), or None."""
        key = (rank, dtype)
        if key not in self._models:
            same = [s for s in self.int_listed if len(s) == rank]
            self._models[key] = None
            if same:
                base = min(same, key=sh.numel)
                moved = sh.moved_shape(base)
                try:
                    m = sh.InputModel(base, as_tuple(self.mod.make_inputs(base, to_dtype(dtype), 0, "cpu")),
                                      moved, as_tuple(self.mod.make_inputs(moved, to_dtype(dtype), 0, "cpu")))
                    self._models[key] = m if m.ok else None
                except Exception:  # noqa: BLE001 - task code
                    pass
        return self._models[key]

    def walk(self, shape: Any, dtype: str, real_cap: int = REAL_INPUTS_CAP) -> Walk | None:
        key = (repr(shape), dtype)
        if key not in self._walks:
            inputs = None
            if sh.is_int_shape(shape) and sh.numel(shape) > real_cap:
                model = self.model(len(shape), dtype)
                inputs = model.inputs(shape) if model else None
            if inputs is None:
                inputs = _meta_inputs(self.mod, shape, to_dtype(dtype), real_cap)
            self._walks[key] = None if inputs is None else walk_launch(self.cand_src, inputs, self.cand_tree)
            self._inputs[key] = inputs
        return self._walks[key]

    def input_elems(self, shape: Any, dtype: str) -> int:
        """Elements of every tensor input at ``shape`` (what a case costs), from the inputs of its walk;
        the shape's product when they could not be made."""
        self.walk(shape, dtype, real_cap=POOL_REAL_INPUTS_CAP)
        inputs = self._inputs.get((repr(shape), dtype))
        if inputs is None:
            return sh.numel(shape) if sh.is_int_shape(shape) else 0
        return sum(t.numel() for t in inputs if isinstance(t, torch.Tensor))

    def input_cap(self, dtype: str) -> int:
        """The size budget in input elements: the device's, or the largest listed shape's if larger."""
        listed = max((self.input_elems(s, dtype) for s in self.int_listed), default=0)
        return max(listed, sh.ELEMENT_BUDGET[sh.device_kind(self.size_class)])

    def original_walk(self, shape: Any, dtype: str) -> Walk | None:
        """The original launcher evaluated on the same inputs (its asserts and raises)."""
        self.walk(shape, dtype)
        inputs = self._inputs.get((repr(shape), dtype))
        return None if inputs is None else walk_launch(self.orig_src, inputs, self.orig_tree)

    def credit(self, case_label: str, shape: Any, dtype: str) -> None:
        w = self.walk(shape, dtype)
        if w is None:
            return
        for bc in self.branches:
            if bc.branch.cuda_side is not None:   # the walk's stand-in tensors are not on the device
                continue
            for truth in w.outcomes.get(bc.branch.key, ()):
                if truth is None:
                    bc.reached.setdefault("dynamic", case_label)
                else:
                    bc.reached.setdefault(str(truth).lower(), case_label)

    def missing(self, bc: BranchCoverage) -> list[bool]:
        if bc.branch.cuda_side is not None:   # no size moves a device-kind test: the line trace decides
            return []
        return [s for s in bc.branch.needs if str(s).lower() not in bc.reached]

    def reaches_missing(self, shape: Any, dtype: str) -> bool:
        w = self.walk(shape, dtype)
        if w is None:
            return False
        return any(t in self.missing(bc) for bc in self.branches for t in w.outcomes.get(bc.branch.key, ())
                   if t is not None)

    # --- validation ---------------------------------------------------------------------------------
    def accepts(self, shape: Any, dtype: str, values: str = "normal") -> str | None:
        """None when the task builds ``shape``, the original's asserts hold and the reference is finite;
        else why not."""
        w = self.original_walk(shape, dtype)
        if w is not None and (w.failed_asserts or w.raises):
            return f"the original launcher rejects it ({(w.failed_asserts + w.raises)[0]})"
        case = CheckCase(shape=shape, dtype=dtype, seed=fresh_seed(), values=values, why="")
        try:
            inputs = make_case_inputs(self.mod, case, self.device)
        except Exception as exc:  # noqa: BLE001 - task code: any failure means "not buildable"
            return f"make_inputs cannot build it ({type(exc).__name__}: {str(exc)[:120]})"
        if not all_finite(inputs):
            return "the stressed inputs are not finite in this dtype"
        try:
            refs = as_tuple(self.mod.reference(*[t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]))
        except Exception as exc:  # noqa: BLE001
            return f"the reference rejects it ({type(exc).__name__}: {str(exc)[:120]})"
        if not all_finite(refs):
            return "the reference is not finite on it"
        return None

    def add(self, shape: Any, dtype: str, why: str, values: str = "normal", check: bool = True) -> bool:
        if check:
            problem = self.accepts(shape, dtype, values)
            if problem:
                self.plan.dropped.append(DroppedCase(shape=shape, dtype=dtype, values=values, why=f"{why}: {problem}"))
                return False
        case = CheckCase(shape=shape, dtype=dtype, seed=fresh_seed(), values=values, why=why)
        self.plan.cases.append(case)
        self.credit(case.label(), shape, dtype)
        return True

    # --- the plan -------------------------------------------------------------------------------------
    def build(self, scope: str = "full") -> CasePlan:
        checked = [norm_shape(s) for s in self.mod.CHECK_SHAPES]
        for dtype in self.dtypes:
            for shape in self.listed:
                if shape in checked:
                    for _ in range(SEEDS_PER_LISTED):
                        self.add(shape, dtype, "listed in CHECK_SHAPES", check=False)
                elif scope != "screen":
                    # a benchmark shape (GPU): large (its inputs and outputs cross the process boundary
                    # as bytes: ~100 s a candidate at 2 seeds and 2 dtypes on the H200 suite's 8192x16384),
                    # so one seed, and none in the screen: only a candidate that would win is checked there
                    self.add(shape, dtype, "listed in BENCH_SHAPES (the timed shape)", check=False)
        if scope == "screen":   # the listed shapes only: a candidate is timed after this, never chosen on it
            self.plan.scope, self.plan.branches = "screen", []
            self.plan.notes.append("screen: CHECK_SHAPES only (no benchmark shape, derived size, value stress "
                                   "or branch coverage); a candidate that would be chosen gets the full checks first")
            return self.plan
        if not self.int_listed:
            self.plan.notes.append(f"shapes {self.listed} are sentinels (the task picks its own sizes): no derived "
                                   "sizes; listed shapes and value stress only")
        for dtype in self.dtypes:
            if self.int_listed:
                odd = sh.odd_variant(self.int_listed, self.blocks)
                if odd and odd not in self.listed:
                    self.add(odd, dtype, "derived: odd, no multiple of any block constant "
                                         f"{sorted(b for b in self.blocks if b <= 1 << 16)[:6]}")
                big, why_not = self._larger(dtype)
                if big and big not in self.listed:
                    self.add(big, dtype, f"derived: larger than every listed shape ({self.input_elems(big, dtype)} "
                                         f"input elements, budget {self.input_cap(dtype)})")
                elif big is None:
                    self.plan.notes.append(why_not)
                if dtype == self.dtypes[0]:
                    self._per_dimension(dtype)
            self._reach_branches(dtype)
            self._stress(dtype)
        self._finish_branches()
        return self.plan

    def _larger(self, dtype: str) -> tuple[tuple[int, ...] | None, str]:
        """The listed shape with the most input elements, its largest dim grown (awkwardly) to about ``GROWTH`` x its
        input elements, within the budget of input elements (``input_cap``: the README's unit; the product of the
        dims overstates a GEMM's (M, N, K) by a factor of ~K/2). (shape, "") or (None, why there is none)."""
        base = max(self.int_listed, key=lambda s: (self.input_elems(s, dtype), sh.numel(s)))
        e0, cap = self.input_elems(base, dtype), self.input_cap(dtype)
        target = min(cap, int(e0 * sh.GROWTH[sh.device_kind(self.size_class)]))
        if target <= e0:
            return None, (f"no larger shape: the largest listed one, {base}, has {e0} input elements, the budget "
                          f"{cap}")
        i = max(range(len(base)), key=lambda k: base[k])
        at = lambda v: base[:i] + (v,) + base[i + 1:]   # noqa: E731
        slope = max(1, self.input_elems(at(base[i] + 1), dtype) - e0)   # input elements per unit of dim i
        seen = {d for s in self.int_listed for d in s}
        v = sh.awkward(base[i] + max(1, (target - e0) // slope), self.blocks, seen)
        for _ in range(24):
            if v <= base[i]:
                break
            if self.input_elems(at(v), dtype) <= cap:
                return at(v), ""
            v = sh.awkward(base[i] + (v - base[i]) * 3 // 4, self.blocks, seen)
        return None, f"no larger shape: growing dim {i} of {base} leaves the budget of {cap} input elements"

    def _per_dimension(self, dtype: str) -> None:
        """Per block constant and the dimension it tiles (``tiles.block_tiles``): sizes with remainder 1 and block-1
        in that dimension and the size block+1 (``tiles.residue_sizes``), the other dims at the smallest listed
        shape's, within the budget of input elements. One dtype: a remainder is a matter of sizes, not of types."""
        base = min(self.int_listed, key=lambda s: (self.input_elems(s, dtype), sh.numel(s)))
        moved = sh.moved_shape(base)
        self.walk(base, dtype)
        self.walk(moved, dtype)
        base_in, moved_in = self._inputs.get((repr(base), dtype)), self._inputs.get((repr(moved), dtype))
        if base_in is None or moved_in is None:
            self.plan.notes.append(f"per-dimension sizes: none (the task's inputs at {moved} could not be made)")
            return
        try:
            found = block_tiles(self.cand_tree, base, base_in, moved, moved_in)
        except Exception as exc:  # noqa: BLE001 - an evaluation of the candidate's text that fails: no tiles
            self.plan.notes.append(f"per-dimension sizes: none (reading the block constants failed: "
                                   f"{type(exc).__name__})")
            return
        self.tiles = found
        if not found:
            self.plan.notes.append("per-dimension sizes: none (no block constant of a kernel tiles a dimension of "
                                   "the shape: no kernel parameter equals one dim at two shapes, or none is "
                                   "compared with a block)")
            return
        cap = self.input_cap(dtype)
        done = {c.shape for c in self.plan.cases if c.dtype == dtype}
        listed: list[str] = []
        for t in found[:MAX_TILES]:
            for v, why in residue_sizes(t.value, base[t.dim]):
                shape = base[:t.dim] + (v,) + base[t.dim + 1:]
                if shape in done:
                    listed.append(f"{t.param}={v} ({why}, already a case)")
                    continue
                if self.input_elems(shape, dtype) > cap:
                    self.plan.dropped.append(DroppedCase(shape=shape, dtype=dtype, why=(
                        f"derived per dimension: {t.label()}, {t.param}={v} ({why}): beyond the budget of {cap} "
                        "input elements")))
                    continue
                if self.add(shape, dtype, f"derived per dimension: {t.label()}: {t.param}={v} ({why})"):
                    done.add(shape)
                    listed.append(f"{t.param}={v} ({why})")
        self.plan.notes.append("per-dimension sizes: " + "; ".join(
            f"{t.label()} in {t.kernel}" for t in found[:MAX_TILES]) + ": " + ", ".join(listed))

    def _open_sides(self) -> set[tuple[str, bool]]:
        return {(bc.branch.key, t) for bc in self.branches for t in self.missing(bc)} - set(self.beyond)

    def _reach_branches(self, dtype: str) -> None:
        if self.int_listed and self._open_sides():
            self._search_sizes(dtype)
        if self.size_class == "cuda":   # a side reachable only at a benchmark size: check it there
            for shape in self.bench:
                if shape not in self.listed and any(self.missing(bc) for bc in self.branches) \
                        and self.reaches_missing(shape, dtype):
                    self.add(shape, dtype, "BENCH_SHAPES: reaches a side of an added branch no smaller size reaches")

    def _search_sizes(self, dtype: str) -> None:
        """One search, smallest size first, over sizes around every constant the tests compare against
        (evaluated only; inputs modelled on meta tensors when large): a size within the budget that
        reaches a missing side becomes a case; one beyond it is recorded; a side that no size reaches,
        every size evaluated, is dead code."""
        for shape in self.int_listed:
            w = self.walk(shape, dtype)
            if w is not None:
                self.constants |= w.constants
        chosen = 0
        self.exhausted[dtype] = True
        for shape in sh.branch_pool(self.int_listed, self.constants, "any", one_per_rank=True):
            open_sides = self._open_sides()
            if not open_sides or chosen >= MAX_BRANCH_SHAPES:
                self.exhausted[dtype] = not open_sides
                break
            w = self.walk(shape, dtype, real_cap=POOL_REAL_INPUTS_CAP)
            if w is None:
                self.unevaluated.add(dtype)   # a size whose inputs could not be made: no proof of deadness
                continue
            hits = {(k, t) for k, ts in w.outcomes.items() for t in ts if (k, t) in open_sides}
            if not hits:
                continue
            if self.input_elems(shape, dtype) <= self.input_cap(dtype):
                sides = sorted(f"{k.rsplit(':', 1)[0]} {t}" for k, t in hits)
                if self.add(shape, dtype, f"derived: reaches {', '.join(sides)[:160]}"):
                    chosen += 1
            else:
                for h in hits:
                    self.beyond[h] = shape

    def _stress(self, dtype: str) -> None:
        base = min(self.int_listed, key=sh.numel) if self.int_listed else self.listed[0]
        for values, why in stress_kinds(self.orig_src):
            self.add(base, dtype, f"value stress: {why}", values=values)
        try:
            probe_inputs = make_case_inputs(self.mod, CheckCase(shape=base, dtype=dtype, seed=fresh_seed(), why=""),
                                            self.device)
            written = written_buffers(self.mod.reference, probe_inputs)
        except Exception:  # noqa: BLE001 - the listed cases report a task that cannot build its inputs
            written = {}
        if written:
            self.add(base, dtype, f"destination buffers prefilled with random values ({'; '.join(written.values())})",
                     values="prefilled")

    def _reachable_beyond(self, bc: BranchCoverage) -> tuple[int, ...] | str | None:
        """The first size beyond the budget that reaches a missing side of ``bc`` (the search of
        :meth:`_reach_branches`); None when the whole search found none (dead code for this task's
        sizes); a line saying why when the search stopped early."""
        for t in self.missing(bc):
            if (bc.branch.key, t) in self.beyond:
                return self.beyond[(bc.branch.key, t)]
        if not self.int_listed:
            return "the task's shapes are sentinels: no size can be derived"
        if self.unevaluated:
            return "some sizes tried could not be evaluated (make_inputs failed for them)"
        if all(self.exhausted.get(d) for d in self.dtypes):
            return None
        return "the search stopped at its case limit"

    def state_read(self, bc: BranchCoverage) -> list[str]:
        """Module-level names that may change between calls (``evaluator.state_names``) the branch's test reads."""
        try:
            return reads_state(bc.branch.test, self.state)
        except SyntaxError:
            return []

    def _finish_branches(self) -> None:
        for bc in self.branches:
            if bc.branch.cuda_side is not None:
                bc.status = "dynamic" if bc.branch.needs else "dead"
                continue
            miss = self.missing(bc)
            state = self.state_read(bc)
            if state and miss:   # reads state a call may change: the calls that ran decide (line trace)
                bc.status = "dynamic"
                bc.note = (f"its test reads module-level state kept across calls ({', '.join(state)}): "
                           "no input size decides it (never dead code); sides checked by a line trace of the "
                           "checked calls")
            elif not miss:
                bc.status = "covered"
            elif "dynamic" in bc.reached:
                bc.status = "dynamic"
                bc.note = "its test depends on a program id or loaded data: sides checked by a line trace"
            else:
                bc.status = "unreached"
                visited = any(w is not None and bc.branch.key in w.outcomes for w in self._walks.values())
                if not visited:
                    bc.note = ("unreached: no checked case evaluates it (its code is off every evaluated path); "
                               "a line trace may still show it")
                    bc.status = "dynamic"
                else:
                    sides = " and ".join("true" if s else "false" for s in miss)
                    where = ("the CPU size budget" if self.size_class == "cpu"
                             else "every derived and benchmark size")
                    beyond = self._reachable_beyond(bc)
                    if beyond is None:
                        bc.status = "dead"
                        bc.note = (f"no size up to {sh.ELEMENT_BUDGET['any']:.0e} elements makes it {sides}: not "
                                   "reachable through this task's input sizes (dead code here)")
                    elif isinstance(beyond, str):
                        bc.note = f"unreached: no size within {where} makes it {sides} ({beyond})"
                    else:
                        bc.note = f"unreached: {sides} first at shape {beyond}, beyond {where}"
        self.plan.branches = self.branches


def device_sides(bc: BranchCoverage, device: str) -> None:
    """A device-kind branch (``if t.is_cuda:``): only the side for ``device`` can run here, whatever the
    inputs, so only that side is needed (checked by the line trace, see coverage.py); the other side is
    dead code on this device, checked where it runs (a verdict is for the device it was reached on)."""
    b = bc.branch
    if b.cuda_side is None:
        return
    here = b.cuda_side if sh.device_kind(device) == "cuda" else not b.cuda_side
    other = [s for s in b.needs if s != here]
    b.needs = [s for s in b.needs if s == here]
    bc.elsewhere = other
    if other:
        where = "a CUDA device" if sh.device_kind(device) != "cuda" else "a non-CUDA device"
        bc.note = (f"device-kind test: its {str(other[0]).lower()} side runs only on {where}, never on {device} "
                   f"(not checked here: dead code on this device)")
    if b.needs:
        bc.note = (bc.note + "; " if bc.note else "") + \
            f"its {str(here).lower()} side runs on {device}: checked by the line trace"


def plan_checks(task_mod: Any, original_source: str, candidate_source: str, device: str,
                include_bench: bool = False, size_class: str | None = None, scope: str = "full") -> CasePlan:
    """The full plan: cases, dropped cases, branch coverage (see the module docstring). ``size_class``
    ("cpu"/"cuda") picks the size budget; None: the device's own. ``scope="screen"``: the listed (and,
    with ``include_bench``, benchmark) shapes only, for the cheap first pass before timing
    (``verify/staged.py``): it verifies nothing a report may call verified. Benchmark shapes are checked
    once per dtype, in full plans only."""
    return _Planner(task_mod, original_source, candidate_source, device, include_bench, size_class).build(scope)


def plan_cases(task_mod: Any, original_source: str, candidate_source: str, device: str) -> list[CheckCase]:
    """The seam the judge reads: the cases of :func:`plan_checks`."""
    return plan_checks(task_mod, original_source, candidate_source, device).cases
