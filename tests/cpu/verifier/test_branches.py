"""Branches a candidate adds, and the AST evaluator that tells which side an input reaches (no sandbox)."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import torch
from tritondx.tools.verify.plan.branches import added_branches
from tritondx.tools.verify.plan.launch_walk import walk_launch
from tritondx.tools.verify.plan.evaluator import UNKNOWN, Evaluator

HERE = Path(__file__).parent
AXPY = (HERE / "tiny_axpy.py").read_text()
EVEN_WRONG = (HERE / "checks" / "k_even_wrong.py").read_text()


def ev(expr: str, **env):
    return Evaluator(env).eval(ast.parse(expr, mode="eval").body)


def test_evaluator_launcher_arithmetic():
    x = torch.empty(7, 300)
    assert ev("x.shape[1] % 256 == 0", x=x) is False
    assert ev("triton.cdiv(x.numel(), 1024)", x=x) == 3
    assert ev("triton.next_power_of_2(N) > 16384", N=16385) is True
    assert ev("(M, N) == x.shape", x=x, M=7, N=300) is True
    assert ev("N if N > 4 and not flag else 0", N=9, flag=False) == 9
    assert ev("x.dtype == torch.float16", x=x) is False


def test_evaluator_unknown_for_unsupported_and_hostile():
    called = []
    assert ev("f(3)", f=lambda *a: called.append(a)) is UNKNOWN      # only listed pure calls run
    assert ev("open('/etc/passwd')") is UNKNOWN
    assert ev("x.data_ptr() % 16", x=torch.empty(4)) is UNKNOWN
    assert not called
    t = time.perf_counter()
    assert ev("2 ** 10 ** 9") is UNKNOWN and ev("1 << (1 << 40)") is UNKNOWN
    assert time.perf_counter() - t < 0.5
    assert ev("pid < 4", pid=UNKNOWN) is UNKNOWN


def test_added_branch_new_test_needs_both_sides():
    (b,) = added_branches(AXPY, EVEN_WRONG)
    assert b.func == "axpy_kernel" and b.test == "EVEN" and b.in_kernel and b.needs == [True, False]
    assert b.true_line is not None and b.false_line is not None
    assert added_branches(AXPY, AXPY) == []


def test_changed_arm_needs_only_that_side():
    orig = "def launch(x):\n    if x.numel() > 16384:\n        B = 256\n    else:\n        B = 128\n    return B\n"
    cand = orig.replace("B = 256", "B = 512")
    (b,) = added_branches(orig, cand)
    assert b.needs == [True] and b.why == "body changed"


def test_walk_follows_kernel_constexpr_and_heuristics():
    outcomes = walk_launch(EVEN_WRONG, (torch.empty(2048), torch.empty(2048))).outcomes
    key = next(k for k in outcomes if k.startswith("axpy_kernel:"))
    assert outcomes[key] == {True}
    assert walk_launch(EVEN_WRONG, (torch.empty(1000), torch.empty(1000))).outcomes[key] == {False}
    heur = '''
import triton
@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def k(x, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    if EVEN:
        pass
def helper(x, n):
    k[(1,)](x, n, BLOCK=64)
def launch(x):
    helper(x, x.shape[0] * 2)
'''
    w = walk_launch(heur, (torch.empty(32),))
    assert list(w.outcomes.values()) == [{True}]   # n = 64: a multiple of BLOCK
    assert list(walk_launch(heur, (torch.empty(33),)).outcomes.values()) == [{False}]


def test_walk_program_id_branch_is_dynamic_and_ifexp_is_a_branch():
    src = '''
@triton.jit
def k(x, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if pid * BLOCK + BLOCK <= n:
        pass
def launch(x):
    B = 1024 if x.numel() > 4096 else 128
    k[(1,)](x, x.numel(), BLOCK=B)
'''
    w = walk_launch(src, (torch.empty(5000),))
    by_line = {int(k.split(":")[1]): v for k, v in w.outcomes.items()}
    assert by_line[5] == {None}          # program id: dynamic
    assert by_line[8] == {True}          # the conditional expression, evaluated
    assert 4096 in w.constants


def test_walk_reports_failed_asserts():
    src = "def launch(x):\n    N = x.shape[0]\n    assert N <= 4096, 'too big'\n"
    assert walk_launch(src, (torch.empty(5000),)).failed_asserts
    assert not walk_launch(src, (torch.empty(100),)).failed_asserts


def test_walk_runs_loops_over_known_values():
    """A helper looping over its arguments (`for a in args: if isinstance(a, torch.Tensor) and
    a.numel() >= 2 ** 30`) is evaluated per argument, not left dynamic."""
    src = '''
def wide(*args):
    for a in args:
        n = a.numel() if isinstance(a, torch.Tensor) else abs(a) if isinstance(a, int) else 0
        if n >= 2 ** 30:
            return True
    return False
def launch(x):
    W = wide(x, x.shape[0])
    if W:
        pass
'''
    w = walk_launch(src, (torch.empty(100),))
    by_line = {int(k.split(":")[1]): v for k, v in w.outcomes.items()}
    assert by_line[5] == {False} and by_line[10] == {False}
    assert 2 ** 30 in w.constants


def test_a_raise_on_a_path_the_evaluator_cannot_decide_is_not_reached():
    """``Walk.raises`` are raises on known paths: behind ``x.view(-1, ...)`` (not followed by the evaluator) the
    test ``N > BLOCK`` is unknown, and its raise must not make the original launcher "reject" a derived or stressed
    case (two corpus norms lost every value-stress case so, 2026-12-04); on a known path it still counts."""
    import torch

    from tritondx.tools.verify.plan.launch_walk import walk_launch
    src = '''
def launch(x, w):
    x2 = x.view(-1, x.shape[-1])
    M, N = x2.shape
    BLOCK = min(4096, N)
    if N > BLOCK:
        raise RuntimeError("too wide")
    for i in range(M):
        assert N < 0
    if x.shape[-1] > 8:
        raise RuntimeError("known")
    return x
'''
    w = walk_launch(src, (torch.empty(2, 3, 4), torch.empty(4)))
    assert w.raises == [] and w.failed_asserts == [], (w.raises, w.failed_asserts)
    w = walk_launch(src, (torch.empty(2, 3, 16), torch.empty(16)))
    assert len(w.raises) == 1 and "known" in w.raises[0], w.raises
