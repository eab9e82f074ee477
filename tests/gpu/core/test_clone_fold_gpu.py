"""GPU: clone_fold's candidate of its showcase (SGD with momentum, in place on copies) compiles for the device, gives
the original's outputs bit for bit and leaves its inputs unchanged (run on a CUDA machine: pytest tests/gpu -m gpu)."""

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
SHOWCASE = Path(__file__).resolve().parents[3] / "bench" / "families" / "clone_fold.py"


def _load(source: str, path: Path):
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("n", [1, 1023, 1024, 1025, 1 << 22])
def test_the_folded_update_equals_the_copy_then_update(tmp_path, n):
    from tritondx.tools.rewrite.clone_fold import fold_source
    new, plan = fold_source(SHOWCASE.read_text())
    assert plan.roots == ["w", "m"]
    orig, cand = _load(SHOWCASE.read_text(), tmp_path / "orig.py"), _load(new, tmp_path / "cand.py")
    inputs = orig.make_inputs((n,), torch.float32, 3, "cuda")
    before = [t.clone() for t in inputs]
    want = orig.launch(*inputs)
    got = cand.launch(*inputs)
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(inputs, before)), "the candidate wrote into its inputs"
    assert all(torch.equal(g, w) for g, w in zip(got, want))
