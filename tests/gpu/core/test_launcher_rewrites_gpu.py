"""GPU: the families that rewrite a launcher, on their showcase tasks (run on a CUDA machine: pytest tests/gpu -m gpu).

- absmax_norm's one-pass absolute maximum compiles for the device and gives exactly what ``x.abs().max()`` gives, for
  each floating dtype and for sizes around its block;
- clone_fold's candidate (SGD with momentum, in place on copies) gives the original's outputs bit for bit and leaves
  its inputs unchanged."""

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
FAMILIES = Path(__file__).resolve().parents[3] / "bench" / "families"
SHOWCASE = FAMILIES / "absmax_norm.py"


def _load(source: str, path: Path):
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", [1, 4095, 4096, 4097, 1 << 22, (1 << 22) * 3 + 5])
def test_the_one_pass_absmax_equals_abs_max(tmp_path, dtype, n):
    from tritondx.tools.rewrite.absmax_norm import absmax_source
    new, done = absmax_source(SHOWCASE.read_text())
    assert done == ["x.abs().max()"]
    mod = _load(new, tmp_path / "cand.py")
    x = torch.randn(n, device="cuda").to(dtype) * 3
    got = mod._tdx_absmax(x)
    want = x.abs().max()
    assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want), (got, want)


@pytest.mark.parametrize("n", [1, 1023, 1024, 1025, 1 << 22])
def test_the_folded_update_equals_the_copy_then_update(tmp_path, n):
    from tritondx.tools.rewrite.clone_fold import fold_source
    new, plan = fold_source((FAMILIES / "clone_fold.py").read_text())
    assert plan.roots == ["w", "m"]
    orig, cand = _load((FAMILIES / "clone_fold.py").read_text(), tmp_path / "orig.py"), _load(new, tmp_path / "cand.py")
    inputs = orig.make_inputs((n,), torch.float32, 3, "cuda")
    before = [t.clone() for t in inputs]
    want = orig.launch(*inputs)
    got = cand.launch(*inputs)
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(inputs, before)), "the candidate wrote into its inputs"
    assert all(torch.equal(g, w) for g, w in zip(got, want))
