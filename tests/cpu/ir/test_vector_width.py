"""Issue 38: ``non_vectorized_global_access`` reads each access's own width (``ld.global.v2.b32`` moves 8 bytes,
``st.global.b32`` 4) and leaves out loads of one scalar per program (a row's scale), which nothing can vectorize."""

from __future__ import annotations

import tritondx.tools.ir.detectors  # noqa: F401  (registers the CUDA detectors)
from tritondx.tools.ir.registry import REGISTRY

from .test_detectors_inline import kir, ptx, vadd_ttgir


def fire(*kernels):
    return REGISTRY["non_vectorized_global_access"].run_capture(list(kernels))


MIXED = ptx('''	.loc	1 10 16                         // k.py:10:16
	@%p1 ld.global.v2.b32 { %r1, %r2 }, [ %rd1 + 0 ];
	@%p2 ld.global.v2.b32 { %r3, %r4 }, [ %rd2 + 0 ];
	.loc	1 11 16                         // k.py:11:16
	@%p1 ld.global.v4.b32 { %r5, %r6, %r7, %r8 }, [ %rd3 + 0 ];
	.loc	1 12 29                         // k.py:12:29
	@%p1 st.global.b32 [ %rd9 + 0 ], { %r9 };''')


def test_each_access_has_its_own_width():
    (f,) = fire(kir({"ptx": MIXED}))
    assert "3/4 global accesses move fewer than 16 bytes per thread: 2 x 8 bytes (ld.global.v2.b32), " \
           "1 x 4 bytes (st.global.b32)" in f.message, f.message
    assert f.source_line == 10 and "ld.global.v2.b32" in f.ir_line and f.metric["width_bytes"] == 8
    assert "are 4 bytes" not in f.message and "are 8 bytes" not in f.message


# line 11 loads one value per program (w = a row's factor): three scalar loads nothing can vectorize
SCALAR_ROW = ptx('''	.loc	1 11 16                         // k.py:11:16
	ld.global.b32 { %r1 }, [ %rd1 + 0 ];
	ld.global.b32 { %r2 }, [ %rd2 + 0 ];
	ld.global.b32 { %r3 }, [ %rd3 + 0 ];
	.loc	1 10 16                         // k.py:10:16
	@%p1 ld.global.v4.b32 { %r5, %r6, %r7, %r8 }, [ %rd4 + 0 ];
	.loc	1 12 29                         // k.py:12:29
	@%p1 st.global.v4.b32 [ %rd9 + 0 ], { %r9, %r10, %r11, %r12 };''')
SCALAR_LOAD = "    %w = tt.load %w_ptr : !tt.ptr<f32> loc(#loc11)\n"


def test_per_row_scalar_loads_are_no_evidence():
    ttgir = vadd_ttgir(extra_ops=SCALAR_LOAD)
    assert not fire(kir({"ptx": SCALAR_ROW, "ttgir": ttgir}))
    # without the TTGIR to say they are scalar, they count (as before)
    (f,) = fire(kir({"ptx": SCALAR_ROW}))
    assert f.source_line == 11


def test_scalar_loads_are_left_out_but_named():
    body = SCALAR_ROW.replace("ld.global.v4.b32 { %r5, %r6, %r7, %r8 }", "ld.global.b32 { %r5 }") \
        .replace("st.global.v4.b32 [ %rd9 + 0 ], { %r9, %r10, %r11, %r12 }", "st.global.b32 [ %rd9 + 0 ], { %r9 }")
    (f,) = fire(kir({"ptx": body, "ttgir": vadd_ttgir(extra_ops=SCALAR_LOAD)}))
    assert f.source_line in (10, 12) and "ld.global.b32 { %r1 }" not in f.ir_line  # never the row's scalar
    assert f.message.startswith("2/2 global accesses move fewer than 16 bytes per thread: ")
    assert "3 load(s)/store(s) of one scalar per program left out" in f.message
    assert f.metric["scalar_accesses"] == 3
