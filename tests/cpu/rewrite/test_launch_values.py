"""Reading and setting a kernel call's literal launch values where the call is: launch() or a helper it calls."""

from __future__ import annotations

import ast

from tritondx.tools.rewrite.launch_values import current_launch_values, set_launch_values

SRC = '''import triton
import triton.language as tl


@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)


def _run(x, n):
    BLOCK = 128
    k[(triton.cdiv(n, BLOCK),)](x, n, BLOCK=BLOCK, num_warps=4)


def launch(x):
    BLOCK = 7   # launch()'s own local of the same name: not the helper's
    _run(x, x.numel())
    return x
'''


def test_a_call_in_a_helper_is_read_and_set_there():
    assert current_launch_values(SRC, {"k"}, {"k": ["BLOCK"]}) == {"k": {"BLOCK": 128, "num_warps": 4}}
    out = set_launch_values(SRC, {"k": {"BLOCK": 256, "num_warps": 8, "num_stages": 2}})
    tree = ast.parse(out)
    fns = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    helper = ast.unparse(fns["_run"])
    assert "BLOCK = 256" in helper and "num_warps=8" in helper and "num_stages=2" in helper
    assert "BLOCK = 7" in ast.unparse(fns["launch"])   # launch() makes no call of k: its locals stay
    assert current_launch_values(out, {"k"}, {"k": ["BLOCK"]}) == {"k": {"BLOCK": 256, "num_warps": 8,
                                                                          "num_stages": 2}}
