"""The capture compiles exactly what the JIT would: specialization (tt.divisibility) comes from the real
arguments. A bare ``triton.compile`` of the same kernel without those attributes loses the 16-byte vector
accesses, and the catalog says why."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from tritondx.tools.ir.context import KernelIR
import tritondx.tools.ir.detectors  # noqa: F401  (registers the CUDA detectors)
from tritondx.tools.ir.registry import REGISTRY

KERNELS = Path(__file__).parent / "kernels"
SCALAR_LD = re.compile(r"\bld\.global(?:\.[a-z]+)*\.b32\b")
VECTOR_LD = re.compile(r"\bld\.global(?:\.[a-z]+)*\.v4\.b32\b")


def _bare_compile(tmp_path):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    spec = importlib.util.spec_from_file_location("k_vadd_bare", KERNELS / "k_vadd.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    old = triton.knobs.cache.dir
    triton.knobs.cache.dir = str(tmp_path / "cache")
    try:
        sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32", "BLOCK": "constexpr"}
        src = ASTSource(mod.vadd_kernel, sig, constexprs={"BLOCK": 1024}, attrs={})
        return triton.compile(src, target=GPUTarget("cuda", 90, 32))
    finally:
        triton.knobs.cache.dir = old


def test_capture_is_jit_faithful(captures, tmp_path):
    (k,) = captures["k_vadd"]
    # (a) through capture_ir: the JIT's binder specialized every pointer and n_elements as 16-divisible
    assert all(k.record["attrs"][str((i,))] == [["tt.divisibility", 16]] for i in range(4))
    assert VECTOR_LD.search(k.texts["ptx"]) and not SCALAR_LD.search(k.texts["ptx"])
    assert k.texts["ttgir"].count("tt.divisibility = 16") == 4
    # (b) a bare compile of the same function, no divisibility attributes: scalar loads
    compiled = _bare_compile(tmp_path)
    ptx = compiled.asm["ptx"]
    assert SCALAR_LD.search(ptx) and not VECTOR_LD.search(ptx)
    assert "tt.divisibility" not in compiled.asm["ttgir"]
    # the catalog attributes the difference to the missing divisibility, on the load's source line
    bare = KernelIR(record={"kernel": "vadd_kernel", "grid": [4096, 1, 1], "options": {"num_warps": 4}},
                    source=(KERNELS / "k_vadd.py").read_text(), texts={"ttgir": compiled.asm["ttgir"], "ptx": ptx},
                    source_path=str(KERNELS / "k_vadd.py"))
    found = REGISTRY["missing_alignment_info"].run(bare)
    load = [f for f in found if f.source_text and f.source_text.endswith("# LOAD-X")]
    assert load and load[0].metric["arguments"] == "%x_ptr,%n_elements" and load[0].metric["ptx_bytes"] == 4
    assert not REGISTRY["missing_alignment_info"].run(k)
