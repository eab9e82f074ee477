"""The interpreter's bounds checks (tools/backends/interpreter/memcheck.py): an access outside every tensor
argument of a launch raises on the call that makes it; accesses inside a tensor's storage (a view's base)
do not; the verifier classifies such a candidate ``out_of_bounds``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tritondx.tools.backends.registry import get_backend
from tritondx.tools.verify.verification import verify_candidate

HERE = Path(__file__).parent
AXPY = HERE / "tiny_axpy.py"

SCRIPT = r'''
import torch, triton, triton.language as tl
from tritondx.tools.backends.interpreter.memcheck import install
assert install()

@triton.jit
def k(x, o, n, B: tl.constexpr, MASK: tl.constexpr, SHIFT: tl.constexpr):
    offs = tl.program_id(0) * B + tl.arange(0, B)
    if MASK:
        m = offs < n
        tl.store(o + offs, tl.load(x + offs + SHIFT, mask=m) * 2, mask=m)
    else:
        tl.store(o + offs, tl.load(x + offs + SHIFT) * 2)

x = torch.randn(1000); o = torch.empty_like(x)
k[(8,)](x, o, 1000, B=128, MASK=True, SHIFT=0)
assert torch.equal(o, x * 2)
for shift, mask in ((0, False), (-1, True)):
    try:
        k[(8,)](x, o, 1000, B=128, MASK=mask, SHIFT=shift)
        print("NOT CAUGHT", shift, mask)
    except Exception as e:
        print("CAUGHT", str(e)[:300])
base = torch.randn(64); v = base[16:32]; ov = torch.empty(16)
k[(1,)](v, ov, 16, B=16, MASK=True, SHIFT=-8)        # inside the view's storage: allowed
assert torch.equal(ov, base[8:24] * 2)
print("VIEW OK")
h = torch.randn(256).half(); oh = torch.empty_like(h)   # triton.reinterpret's wrapper: the tensor it wraps
k[(2,)](triton.reinterpret(h, tl.float16), triton.reinterpret(oh, tl.float16), 256, B=128, MASK=True, SHIFT=0)
assert torch.equal(oh, h * 2)
print("REINTERPRET OK")
'''


def test_out_of_bounds_access_raises_on_the_call_that_makes_it():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    caught = [ln for ln in lines if ln.startswith("CAUGHT")]
    assert len(caught) == 2 and "NOT CAUGHT" not in r.stdout, r.stdout
    assert "load out of bounds in kernel k: 24 of 128 addresses" in caught[0]       # the unmasked tail
    assert "load out of bounds" in caught[1] and "before an argument" in caught[1]   # one element before x
    assert "VIEW OK" in lines and "REINTERPRET OK" in lines


def test_unmasked_candidate_is_out_of_bounds(tmp_path):
    cand = tmp_path / "unmasked.py"
    cand.write_text(AXPY.read_text().replace("    mask = offs < n_elements\n", "    mask = offs < 1 << 40\n"))
    v = verify_candidate(str(AXPY), str(cand), "unmasked", get_backend("interpreter"), allowed_ops=["empty_like"])
    assert not v.passed and v.klass == "out_of_bounds", (v.klass, v.reason)
    assert "shape (1000,)" in v.reason and "outside every tensor argument" in v.reason
