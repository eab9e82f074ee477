"""A line trace of the candidate file, installed by the (untrusted) runner around each call.

Under ``TRITON_INTERPRET=1`` kernel bodies run as Python compiled with the candidate's file name and
line numbers, so their lines show too; on a GPU only host lines do. The trace is evidence from the
candidate's own process, so the judge uses it only against the candidate: a branch side whose first
line never ran is unreached (a candidate gains nothing by hiding its coverage), while a side the
trace claims is reached counts only where the judge could not evaluate the branch itself.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from tritondx.tools.verify.plan.cases import BranchCoverage


class LineTracer:
    """``with LineTracer(path) as t: ...``; ``t.lines``: line numbers of ``path`` that ran."""

    def __init__(self, path: str):
        self.path = path
        self.lines: set[int] = set()

    def _local(self, frame: Any, event: str, arg: Any):
        if event == "line":
            self.lines.add(frame.f_lineno)
        return self._local

    def _global(self, frame: Any, event: str, arg: Any):
        if frame.f_code.co_filename == self.path:
            self.lines.add(frame.f_lineno)
            return self._local
        return None

    def __enter__(self) -> "LineTracer":
        self._old = sys.gettrace()
        sys.settrace(self._global)
        threading.settrace(self._global)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.settrace(self._old)
        threading.settrace(self._old)  # type: ignore[arg-type]


def _arm_ran(arm: list[int], spots: set[tuple]) -> bool:
    """Whether an instruction that lies wholly inside ``arm`` (line, col, end line, end col) ran."""
    start, end = (arm[0], arm[1]), (arm[2], arm[3])
    return any(start <= (s[0], s[1]) and (s[2], s[3]) <= end for s in spots)


def trace_decides(bc: BranchCoverage, kernel_lines_traced: bool) -> bool:
    """Whether :func:`trace_verdict` decides ``bc`` from the line trace: a branch the judge could not
    evaluate (status ``dynamic``) whose lines the trace sees on this backend. The judge asks the runner
    for a trace (it costs about twice an interpreted call) only where one of these is in the plan."""
    return bc.status == "dynamic" and (kernel_lines_traced or not bc.branch.in_kernel)


def trace_verdict(branches: list[BranchCoverage], lines: set[int], kernel_lines_traced: bool,
                  spots: set[tuple] | None = None) -> list[str]:
    """Problems the trace shows for branches the judge could not evaluate (status ``dynamic``): a
    needed side whose first line never ran. A conditional expression has no line per side: its sides
    are told apart by ``spots``, the positions of the instructions that ran on its lines (when neither
    arm shows any, the positions say nothing: its line must have run). Each line also updates the
    branch's record."""
    problems = []
    for bc in branches:
        if bc.status != "dynamic":
            continue
        b = bc.branch
        if not trace_decides(bc, kernel_lines_traced):
            bc.note += "; no kernel line trace on this backend"
            continue
        unseen = []
        arms = [_arm_ran(a, spots) for a in b.arms] if b.arms and spots is not None else []
        for side, first in ((True, b.true_line), (False, b.false_line)):
            if any(arms):   # a conditional expression whose instruction positions show its sides
                if arms[0 if side else 1]:
                    bc.reached.setdefault(str(side).lower(), "line trace")
                elif side in b.needs:
                    unseen.append("true" if side else "false")
                continue
            if side not in b.needs:
                continue
            if first is None:   # no line of its own (a fall-through, a conditional expression):
                if b.line not in lines:   # the test never ran, so neither did this side
                    unseen.append("true" if side else "false")
                continue
            if first in lines:
                bc.reached.setdefault(str(side).lower(), "line trace")
            else:
                unseen.append("true" if side else "false")
        if unseen:
            bc.status = "unreached"
            bc.note = f"unreached: the line trace never ran its {' and '.join(unseen)} side"
            problems.append(bc.line())
        elif all(str(s).lower() in bc.reached or (s is False and b.false_line is None) for s in b.needs):
            bc.note += "; sides seen in the line trace"
    return problems
