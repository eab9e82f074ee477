"""The device flip (trusted side): check the CUDA side of the device-kind tests a candidate adds on a
verifier device that is not CUDA.

A device-kind test (``if x.is_cuda:``, ``x.device.type == "cuda"``, their negations, ``a if x.is_cuda
else b``; ``branches.cuda_side``) is constant on one device: on the CPU interpreter its CUDA side never
runs, so a candidate could be honest there and wrong on a GPU. The judge therefore checks such a
candidate a second time with every such test it adds replaced by the constant of its CUDA side:

- :func:`flipped_source` rewrites the candidate's *text* here (line numbers kept, so the runner's line
  trace still names the candidate's lines); the flipped file goes to a runner of its own
  (``hello["flip"]``). That runner never sees the unflipped source, so candidate code in it cannot
  undo the flip (a flip done inside the candidate's own process could be undone by the candidate);
- inside that runner, device queries the CUDA side typically makes answer as on an H200
  (``fake_gpu.py``, only to calls from the candidate's file); anything else CUDA-only fails there,
  and the candidate is rejected: its CUDA side was not verified;
- :func:`flip_cases` picks the flipped cases (every distinct shape and value kind of the plan, the
  dtypes in turn, fresh seeds): ordinary checked cases, labelled ``flipped to the CUDA side``;
- :func:`credit` marks each flipped side reached by the first flipped case whose line trace ran it;
  a side no flipped case ran is unreached (an added branch side no checked case reaches).

Nothing here gives the candidate a new power: its own test expressions become constants, and the
fake answers exist only in its own process; inputs, seeds and the comparison are the judge's as for
any case. A nested test that tries to tell the flip from a GPU (``if x.device.index is None:``) is
itself an added branch that must be reached both ways (``torch.cuda.is_available()`` is a device-kind
test: flipped too). A test with a device-kind part (``x.is_cuda and n > 0``) has that part flipped; the
sides its flipped cases run count as reached.
"""

from __future__ import annotations

import ast

from tritondx.tools.verify.plan.branches import device_atoms
from tritondx.tools.verify.plan.cases import FLIPPED_LABEL, BranchCoverage, CheckCase, fresh_seed
from tritondx.tools.verify.plan.shapes import device_kind


def flip_branches(branches: list[BranchCoverage], device: str) -> list[BranchCoverage]:
    """The added branches whose test has a device-kind part that cannot take its CUDA value on
    ``device``: device-kind tests whose CUDA side runs only elsewhere, and tests that combine one with
    other conditions (``if x.is_cuda and n > 0``). None on a CUDA device."""
    if device_kind(device) == "cuda":
        return []
    out = []
    for bc in branches:
        b = bc.branch
        if b.cuda_side is not None:
            if b.cuda_side in bc.elsewhere:
                out.append(bc)
        elif b.atoms:
            out.append(bc)
    return out


def _position(key: str) -> tuple[int, int]:
    """(line, col) of a branch key ``func:line:col``."""
    _, line, col = key.rsplit(":", 2)
    return int(line), int(col)


def flipped_source(source: str, branches: list[BranchCoverage]) -> str:
    """``source`` with every device-kind part of each branch's test replaced by its value on a CUDA
    device. A part on one line keeps its width (the constant padded with spaces); one over several
    lines becomes ``(True`` + its newlines + ``)``: every line keeps its number. Raises ValueError when
    a branch's node is not found or the result does not parse (then nothing would be verified)."""
    want = {_position(bc.branch.key) for bc in branches}
    atoms = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.If, ast.IfExp)) and (node.lineno, node.col_offset) in want:
            want.discard((node.lineno, node.col_offset))
            atoms += device_atoms(node.test)
    if want:
        raise ValueError(f"no branch at line(s) {sorted(line for line, _ in want)}")
    lines = [ln.encode() for ln in source.splitlines(keepends=True)]
    # last first: a replacement never moves the offsets of one still to come
    for atom, side in sorted(atoms, key=lambda t: (t[0].lineno, t[0].col_offset), reverse=True):
        first, last = atom.lineno - 1, atom.end_lineno - 1
        joined = b"".join(lines[first:last + 1])
        span_len = len(joined) - atom.col_offset - (len(lines[last]) - atom.end_col_offset)
        const = str(bool(side)).encode()
        new = const.ljust(span_len) if first == last else b"(" + const + b"\n" * (last - first) + b")"
        joined = joined[:atom.col_offset] + new + joined[atom.col_offset + span_len:]
        lines[first:last + 1] = joined.splitlines(keepends=True)
    out = b"".join(lines).decode()
    if out.count("\n") != source.count("\n"):
        raise ValueError("the flip moved lines")
    ast.parse(out)
    return out


def flip_cases(cases: list[CheckCase], dtypes: list[str]) -> list[CheckCase]:
    """One flipped case per distinct (shape, value kind) of the plan, the dtypes in turn, each with a
    fresh seed (nothing the unflipped runner saw or answered is an answer here)."""
    seen: dict[tuple[str, str], list[CheckCase]] = {}
    for c in cases:
        seen.setdefault((repr(c.shape), c.values), []).append(c)
    out = []
    for i, group in enumerate(seen.values()):
        want = dtypes[i % len(dtypes)] if dtypes else group[0].dtype
        pick = next((c for c in group if c.dtype == want), group[0])
        out.append(pick.model_copy(update={"flipped": True, "seed": fresh_seed(),
                                           "why": f"{pick.why}; device-kind tests flipped"}))
    return out


def _side_line(bc: BranchCoverage, side: bool) -> int | None:
    b = bc.branch
    return b.true_line if side else b.false_line


def credit(branches: list[BranchCoverage], lines_by_case: list[tuple[str, set[int]]]) -> list[str]:
    """Mark the sides the flipped cases ran (label of the first whose line trace shows the side's first
    line). A device-kind test's CUDA side must have run (its arm's first line, or for a conditional
    expression or a fall-through, the test's line: under the flip the test is that constant); the
    coverage lines of those that did not are returned (each is then unreached). A test that combines a
    device-kind part with others gains the sides the flipped cases ran."""
    problems = []
    for bc in branches:
        b = bc.branch
        if b.cuda_side is None:   # mixed: sides no unflipped case reached, run with the device parts flipped
            for side in b.needs:
                line = _side_line(bc, side)
                by = next((lab for lab, lines in lines_by_case if line in lines), None) if line else None
                if by is not None and str(side).lower() not in bc.reached:
                    bc.reached[str(side).lower()] = by
                    bc.note = (bc.note + "; " if bc.note else "") + \
                        f"its {str(side).lower()} side reached with the device-kind tests flipped ({by})"
            if bc.status in ("dead", "unreached") and all(str(s).lower() in bc.reached for s in b.needs):
                bc.status = "covered"
            continue
        side = str(b.cuda_side).lower()
        line = _side_line(bc, b.cuda_side) or b.line
        by = next((label for label, lines in lines_by_case if line in lines), None)
        bc.elsewhere = [s for s in bc.elsewhere if s != b.cuda_side]
        if by is not None:
            bc.reached[side] = by
            bc.note = (f"device-kind test: its {side} side (CUDA) checked here with the device-kind tests "
                       f"flipped ({by})" + "".join(f"; {p}" for p in bc.note.split("; ")[1:]))
            if not b.needs and bc.status == "dead":
                bc.status = "covered"
        else:
            bc.status = "unreached"
            bc.note = (f"unreached: its {side} side (CUDA) did not run in any case {FLIPPED_LABEL} "
                       f"(line {line} never ran)")
            problems.append(bc.line())
    return problems
