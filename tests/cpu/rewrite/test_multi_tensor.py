"""fuse_launches (multi-tensor): a loop of per-tensor launches becomes one multi-tensor launch."""

from __future__ import annotations

import ast

from tritondx.tools.rewrite.multi_tensor import plan_multi_tensor


def _launch_calls(rw, source):
    launch = rw.function(source, "launch")
    return [n for n in ast.walk(launch) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)]


def test_triage_flags_launch_in_loop(rw):
    ctx = rw.make_context("l2_foreach_add")
    hits = [f for f in ctx.findings if f.detector == "launch_in_loop"]
    assert hits and "fuse_launches" in hits[0].suggests
    # straight-line launchers are not flagged
    assert not [f for f in rw.make_context("l1_addcmul").findings if f.detector == "launch_in_loop"]


def test_foreach_one_launch(rw, tmp_path):
    ctx = rw.make_context("l2_foreach_add")   # triage findings only: the CPU-only path
    props = [p for p in rw.CATALOG["fuse_launches"].fn(ctx) if "multi_tensor" in p.params]
    assert len(props) == 1
    src = props[0].source
    # no kernel launch left in launch() itself: one launch of the multi-tensor kernel after the loop
    assert _launch_calls(rw, src) == []
    (name,) = rw.kernel_names(src)
    kern = rw.function(src, name)
    assert [ast.unparse(c) for c in rw.calls(kern, "tl.static_range")] == ["tl.static_range(MT_N)"]
    helper = next(n for n in rw.tree(src).body if isinstance(n, ast.FunctionDef) and n.name.startswith("_mt_launch"))
    assert [c for c in ast.walk(helper) if isinstance(c, ast.Call) and isinstance(c.func, ast.Subscript)]
    rw.verify("l2_foreach_add", src, tmp_path)


def test_no_multi_tensor_without_a_loop(rw):
    for task in ("l1_addcmul", "l2_geglu", "l3_matmul"):
        assert plan_multi_tensor(rw.task_path(task).read_text()) == []


def test_outputs_read_in_the_loop_block_it():
    src = '''
import torch
import triton
import triton.language as tl


@triton.jit
def k(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def launch(*xs):
    outs = []
    prev = xs[0]
    for x in xs:
        o = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 256),)](prev, o, x.numel(), BLOCK=256)
        prev = o
        outs.append(o)
    return tuple(outs)
'''
    # the next launch reads the previous output: deferring the launches would reorder a dependency
    assert plan_multi_tensor(src) == []
    ok = src.replace("        prev = o\n", "").replace("(prev, o,", "(x, o,")
    assert len(plan_multi_tensor(ok)) == 1
    # a 2-D grid is not a flat program range
    assert plan_multi_tensor(ok.replace("(triton.cdiv(x.numel(), 256),)", "(triton.cdiv(x.numel(), 256), 1)")) == []


def test_gemm_per_group_loop_gets_the_grouped_template_from_triage(rw):
    from tritondx.tools.rewrite.expert import propose
    ctx = rw.make_context("l3_grouped_matmul")
    (hit,) = [f for f in ctx.findings if f.detector == "launch_in_loop"]
    assert set(hit.suggests) == {"fuse_launches", "persistent"}
    props = propose(ctx)
    assert props and props[0].family == "persistent" and "grouped GEMM template" in props[0].description
    # a loop of elementwise launches is not a persistent-GEMM case
    (fe,) = [f for f in rw.make_context("l2_foreach_add").findings if f.detector == "launch_in_loop"]
    assert fe.suggests == ["fuse_launches"]


def test_a_loop_of_launches_in_a_helper(rw, tmp_path):
    """The loop is a helper's (launch() calls a library function that loops): found and rewritten there, and
    triage names it (``launch_in_loop``, the helper's name in the message)."""
    from tritondx.tools.evidence.triage import triage
    from tritondx.tools.task.spec import load_task
    src = rw.task_path("l2_foreach_add").read_text()
    old = "def launch(*tensors):\n"
    assert src.count(old) == 1
    src = src.replace(old, "def launch(*tensors):\n    return _foreach_add(*tensors)\n\n\ndef _foreach_add(*tensors):\n")
    task = tmp_path / "helper_task.py"
    task.write_text(src)
    _, found = triage(load_task(task))
    (hit,) = [f for f in found if f.detector == "launch_in_loop"]
    assert hit.message.startswith("_foreach_add() launches add_kernel")
    ((out, kernel),) = plan_multi_tensor(src)
    assert kernel == "add_kernel"
    helper = rw.function(out, "_foreach_add")
    assert not [n for n in ast.walk(helper) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)]
    rw.verify(str(task), out, tmp_path)
