"""GPU: absmax_norm's one-pass absolute maximum compiles for the device and gives exactly what ``x.abs().max()``
gives, for each floating dtype and for sizes around its block (run on a CUDA machine: pytest tests/gpu -m gpu)."""

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
SHOWCASE = Path(__file__).resolve().parents[3] / "bench" / "families" / "absmax_norm.py"


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
