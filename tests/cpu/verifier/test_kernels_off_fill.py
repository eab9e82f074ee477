"""The kernels-off check (every Triton launch given an empty grid; an output still correct was computed outside
Triton) where one tolerance entry covers an int8 output and its small float scales: atol 1 is wider than every
scale, so the scale buffer's untouched zeros are "correct" too. An output the kernels changed from an untouched
fill is the kernels' output (the task's own kernel passes; it was rejected, as was every candidate of such a task);
a kernel that leaves that output untouched is still rejected (``tools/verify/judge/candidate.py``): as not from
Triton where the judge's kernels-off call skipped its launch, or as a mismatch where a prefilled destination case
came first (the judge picks the kernels-off mode at random, so either can be the first to catch it)."""

from __future__ import annotations

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.verify.verification import verify_candidate

TASK = '''import torch
import triton
import triton.language as tl


@triton.jit
def quant_kernel(x_ptr, q_ptr, s_ptr, D: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, D)
    x = tl.load(x_ptr + row * D + offs)
    s = tl.max(tl.abs(x), axis=0) / 127.0
    tl.store(q_ptr + row * D + offs, (x / s).to(tl.int8))
    tl.store(s_ptr + row, s)


def launch(x, q, s):
    q = q.clone()
    s = s.clone()
    quant_kernel[(x.shape[0],)](x, q, s, D=x.shape[1])
    return q, s


def reference(x, q, s):
    scale = x.abs().amax(dim=1) / 127.0
    q = q.clone()
    s = s.clone()
    q[: x.shape[0]] = (x / scale[:, None]).to(torch.int8)
    s[: x.shape[0]] = scale
    return q, s


def make_inputs(shape, dtype, seed, device):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 0.5).to(device=device, dtype=dtype)
    # destination buffers with 3 rows more than x: the kernel writes the first rows (the rest keep their zeros)
    rows = shape[0] + 3
    return (x, torch.zeros((rows, shape[1]), dtype=torch.int8, device=device),
            torch.zeros(rows, dtype=dtype, device=device))


CHECK_SHAPES = [(8, 32)]
BENCH_SHAPES = [(4096, 128)]
DTYPES = [torch.float32]
# one entry for both outputs: atol 1 (the int8 values) is wider than every scale (~0.01), so a scale buffer left
# at zeros is within it
TOLERANCE = {torch.float32: {"atol": 1.0, "rtol": 0.0}}
'''


def _verify(tmp_path, cand_src: str):
    task, cand = tmp_path / "task.py", tmp_path / "cand.py"
    task.write_text(TASK)
    cand.write_text(cand_src)
    return verify_candidate(str(task), str(cand), "cand", get_backend("interpreter"), allowed_ops=["clone"])


def test_the_kernel_that_writes_the_scales_passes(tmp_path):
    r = _verify(tmp_path, TASK)
    assert r.passed, r.reason


def test_a_kernel_that_leaves_the_scales_untouched_is_rejected(tmp_path):
    old = "    tl.store(s_ptr + row, s)\n"
    assert old in TASK
    r = _verify(tmp_path, TASK.replace(old, ""))
    assert not r.passed and "output 1" in r.reason, (r.klass, r.reason)
    if r.klass == "mismatch":   # caught by the prefilled-destination case: the untouched scales kept its fill
        assert "prefilled" in r.reason, r.reason
    else:
        assert r.klass == "not_from_triton", (r.klass, r.reason)


def test_a_prefilled_destination_the_kernels_changed_is_their_output(tmp_path):
    """The prefilled-destination case fills the buffers with random values: a fill the kernels-off call left as
    passed in is untouched too, though not a constant. With a tolerance wide enough that every random fill sits
    within it, the honest kernel used to be called "still correct without Triton" whenever that case drew the
    every-launch-off mode (one draw in two per candidate): six copies in one round all pass only with the fix."""
    from tritondx.tools.verify.verification import verify_round
    task = tmp_path / "task.py"
    task.write_text(TASK.replace('{"atol": 1.0, "rtol": 0.0}', '{"atol": 1000.0, "rtol": 0.0}'))
    cands = []
    for k in range(6):
        p = tmp_path / f"cand{k}.py"
        p.write_text(task.read_text())
        cands.append({"id": f"c{k}", "path": str(p)})
    verdicts = verify_round(str(task), cands, get_backend("interpreter"), ["clone"], 120.0, 1)
    assert len(verdicts) == 6
    for v in verdicts:
        assert v.passed, (v.candidate_id, v.klass, v.reason)


def test_left_as_passed_knows_a_fill_from_an_input():
    import torch

    from tritondx.tools.verify.judge.compare import left_as_passed
    fill = torch.tensor([0.3, -1.2, 0.7])
    written = torch.tensor([0.01, 0.02, 0.03])
    assert left_as_passed(fill.clone(), written, (torch.ones(2), fill))           # the destination as passed in
    assert left_as_passed(torch.zeros(3), written, ())                             # a constant fill
    assert not left_as_passed(fill.clone(), written, (torch.ones(2),))             # computed, not passed in
    assert not left_as_passed(fill.clone(), fill.clone(), (fill,))                 # the kernels did not change it
