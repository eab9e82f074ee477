"""clone_fold with a store whose mask reads memory (``mask = mask & (keep == 0)`` with ``keep`` loaded): the store
skips elements the copy filled, so the fold writes the source's value there, ``tl.where(M, V, tl.load(src, mask=B))``
under the mask's address-only bounds ``B`` (``tools/evidence/inplace.py``, ``GuardedStore``)."""

from __future__ import annotations

import ast
import json

import pytest
from tritondx.tools.backends.registry import get_backend
from tritondx.tools.evidence.inplace import GuardedStore, fold_plan
from tritondx.tools.rewrite.clone_fold import fold_source
from tritondx.tools.verify.verification import verify_candidate
from tdx_interp import run_interpreted

#: a task written for these tests: x += 2 * y where keep is 0, in place on a copy of x (``mask`` is bound twice)
TASK = '''import torch
import triton
import triton.language as tl


@triton.jit
def skip_add_kernel(x_ptr, y_ptr, keep_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    keep = tl.load(keep_ptr + offs, mask=mask, other=0)
    mask = mask & (keep == 0)
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, x + 2.0 * y, mask=mask)


def launch(x, y, keep):
    x = x.clone()
    n = x.numel()
    skip_add_kernel[(triton.cdiv(n, 128),)](x, y, keep, n, BLOCK=128)
    return x


def reference(x, y, keep):
    return torch.where(keep != 0, x, x + 2.0 * y)


def make_inputs(shape, dtype, seed, device):
    gen = torch.Generator().manual_seed(seed)
    x, y = (torch.randn(shape, generator=gen).to(device=device, dtype=dtype) for _ in range(2))
    keep = (torch.rand(shape, generator=gen) < 0.5).to(device=device, dtype=torch.int32)
    keep.view(-1)[0] = 1   # never all zeros (the verifier refuses an input of zeros; 3 elements were, 1 seed in 8)
    return x, y, keep


CHECK_SHAPES = [(1000,), (3,)]
BENCH_SHAPES = [(1 << 24,)]
DTYPES = [torch.float32]
TOLERANCE = {torch.float32: {"atol": 1e-6, "rtol": 1e-6}}
'''

STORE = "    tl.store(x_ptr + offs, x + 2.0 * y, mask=mask)\n"
GUARDED = ("    tl.store(x_ptr + offs, tl.where(mask, x + 2.0 * y, tl.load(x_ptr__src + offs, mask=offs < n)), "
           "mask=offs < n)\n")

#: runs ``launch`` of the task and of its fold under the interpreter, fresh allocations poisoned (NaN) as the
#: verifier does, so that an element the fold leaves unwritten shows
RUN = r'''
import importlib.util, json, sys, torch
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod); return mod
task, cand = load(sys.argv[1], "task"), load(sys.argv[2], "cand")
empty_like = torch.empty_like
torch.empty_like = lambda t, **kw: empty_like(t, **kw).fill_(float("nan"))
x, y, keep = task.make_inputs((1000,), torch.float32, 0, "cpu")
keep[:5] = 1   # the data mask false at the first elements, and in the last, partial, block
keep[-3:] = 1
inputs = [t.clone() for t in (x, y, keep)]
got = cand.launch(x, y, keep)
want = task.launch(*inputs)
skipped = keep != 0
print(json.dumps({
    "equal": bool(torch.equal(got, want)),
    "skipped_kept": bool(torch.equal(got[skipped], inputs[0][skipped])),
    "updated": bool(torch.equal(got[~skipped], inputs[0][~skipped] + 2.0 * inputs[1][~skipped])),
    "skipped": int(skipped.sum()), "inputs_unchanged": all(torch.equal(a, b) for a, b in zip((x, y, keep), inputs)),
}))
'''


def _run(tmp_path, task_src: str, cand_src: str) -> dict:
    (tmp_path / "task.py").write_text(task_src)
    (tmp_path / "cand.py").write_text(cand_src)
    out = run_interpreted(RUN, str(tmp_path / "task.py"), str(tmp_path / "cand.py"), timeout=300)   # tdx_interp.py
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _variant(old: str, new: str) -> str:
    assert old in TASK
    return TASK.replace(old, new)


def test_a_store_with_a_data_mask_folds_with_its_bounds():
    plan = fold_plan(ast.parse(TASK))
    assert plan is not None and plan.kernels == {"skip_add_kernel": ["x_ptr"]}
    line = TASK.splitlines().index(STORE.rstrip("\n")) + 1
    assert plan.guards == {"skip_add_kernel": [GuardedStore(line, "offs < n", [])]}


def test_the_guarded_store_reads_the_source_where_the_data_mask_skips():
    new, _ = fold_source(TASK)
    ast.parse(new)
    compile(new, "cand.py", "exec")
    assert GUARDED in new and STORE not in new
    assert "    x = tl.load(x_ptr__src + offs, mask=mask)\n" in new          # the data-masked load reads the source
    assert "    keep = tl.load(keep_ptr + offs, mask=mask, other=0)\n    mask = mask & (keep == 0)\n" in new
    assert "def skip_add_kernel(x_ptr, x_ptr__src, y_ptr, keep_ptr, n, BLOCK: tl.constexpr):" in new
    assert "    x__src = x\n    x = torch.empty_like(x)\n" in new and ".clone()" not in new


def test_the_fold_matches_the_task_under_the_interpreter(tmp_path):
    new, _ = fold_source(TASK)
    r = _run(tmp_path, TASK, new)
    assert r["skipped"] >= 8 and r == {**r, "equal": True, "skipped_kept": True, "updated": True,
                                       "inputs_unchanged": True}, r


def test_bounds_whose_names_are_bound_again_go_through_a_temporary(tmp_path):
    """``lim`` is bound again before the store: ``offs < lim`` written at the store would read the new ``lim``, so the
    bounds are kept in a temporary computed before the first ``mask`` is."""
    src = _variant("    mask = offs < n\n", "    lim = n\n    mask = offs < lim\n").replace(
        "    x = tl.load(x_ptr + offs", "    lim = lim * 0\n    x = tl.load(x_ptr + offs")
    plan = fold_plan(ast.parse(src))
    (g,) = plan.guards["skip_add_kernel"]
    assert g.bounds == "_tdx_x_ptr_bounds" and [t for _, t in g.temps] == ["_tdx_x_ptr_bounds = offs < lim"]
    new, _ = fold_source(src)
    assert "    lim = n\n    _tdx_x_ptr_bounds = offs < lim\n    mask = offs < lim\n" in new
    assert "tl.load(x_ptr__src + offs, mask=_tdx_x_ptr_bounds)), mask=_tdx_x_ptr_bounds)" in new
    r = _run(tmp_path, src, new)
    assert r == {**r, "equal": True, "skipped_kept": True, "updated": True, "inputs_unchanged": True}, r


def test_a_mask_of_data_alone_has_no_bounds_the_store_covers_the_block():
    src = _variant("    mask = offs < n\n    keep = tl.load(keep_ptr + offs, mask=mask, other=0)\n"
                   "    mask = mask & (keep == 0)\n", "    keep = tl.load(keep_ptr + offs)\n    mask = keep == 0\n")
    (g,) = fold_plan(ast.parse(src)).guards["skip_add_kernel"]
    assert g.bounds is None and not g.temps
    new, _ = fold_source(src)
    compile(new, "cand.py", "exec")
    assert "    tl.store(x_ptr + offs, tl.where(mask, x + 2.0 * y, tl.load(x_ptr__src + offs)))\n" in new


def test_the_folded_candidate_passes_the_verifier(tmp_path):
    """The verifier poisons fresh allocations and compares against the reference at every check shape."""
    task, cand = tmp_path / "task.py", tmp_path / "cand.py"
    task.write_text(TASK)
    cand.write_text(fold_source(TASK)[0])
    r = verify_candidate(str(task), str(cand), "cand", get_backend("interpreter"))
    assert r.passed, r.reason


@pytest.mark.parametrize("old,new,why", [
    (STORE, "    idx = tl.load(keep_ptr + offs, mask=mask)\n    tl.store(x_ptr + idx, x + 2.0 * y, mask=mask)\n",
     "a store through a loaded index (a scatter)"),
    (STORE, "    for _ in range(1):\n    " + STORE, "the store in a loop"),
    (STORE, "    if pid >= 0:\n    " + STORE, "the store in a branch"),
    ("    mask = mask & (keep == 0)\n", "    mask = (offs < n) | (keep == 0)\n",
     "the data and the bounds in one conjunct: dropping it would drop the bounds"),
    ("    mask = mask & (keep == 0)\n", "    mask = mask & (keep == pid)\n", "a block index outside the loads"),
    (STORE, STORE + STORE.replace("x + 2.0 * y", "x"), "two stores to the folded pointer"),
    (STORE, STORE.replace("x_ptr + offs", "x_ptr + offs // 2"), "an address no program owns alone"),
    ("    pid = tl.program_id(0)\n", "    pid = tl.program_id(0) + tl.program_id(1)\n",
     "programs along another axis"),
    ("    offs = pid * BLOCK + tl.arange(0, BLOCK)\n", "    offs = pid * 64 + tl.arange(0, BLOCK)\n",
     "blocks that overlap (a stride shorter than the block)"),
    ("    mask = offs < n\n", "    mask = offs < n\n    if n > 0:\n        mask = mask & (offs >= 0)\n",
     "the mask bound again in a branch"),
])
def test_no_fold_where_a_data_mask_cannot_be_guarded(old, new, why):
    assert fold_plan(ast.parse(_variant(old, new))) is None, why
