"""Every NVIDIA detector on small hand-written IR (TTIR/TTGIR/PTX/pass-dump snippets trimmed from real
cuda:90 output of Triton 3.6), plus inline counter-examples where the difference is one attribute."""

from __future__ import annotations

import pytest
from tritondx.tools.ir.context import KernelIR
import tritondx.tools.ir.detectors  # noqa: F401  (registers the CUDA detectors)
from tritondx.tools.ir.detectors.pass_summary import pass_changes
from tritondx.tools.ir.registry import REGISTRY, REWRITE_FAMILIES, catalog_table, run_detectors

SRC_PATH = "/work/t/k.py"
F = f'"{SRC_PATH}"'
SOURCE_LINES = {
    7: "pid = tl.program_id(0)",
    8: "offs = pid * BLOCK + tl.arange(0, BLOCK)",
    9: "mask = offs < n_elements",
    10: "x = tl.load(x_ptr + offs, mask=mask)",
    11: "w = tl.load(w_ptr + cols, mask=mask)",
    12: "tl.store(out_ptr + offs, x, mask=mask)",
    13: "for start in range(0, N, BLOCK): acc = acc * 1",
    14: "acc += tl.load(base + start + cols, mask=start + cols < N, other=0.0)",
    15: "for start in range(0, N, BLOCK): acc = acc * 1",
    16: "x = tl.load(base + start + cols, mask=start + cols < N, other=0.0)",
    17: "acc = tl.dot(a, b, acc)",
    18: "tl.atomic_add(out_ptr, tl.sum(x, axis=0))",
    19: "acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)",
    20: "out = tl.trans(y)",
    21: "k[grid](x, out, n, BLOCK=1024)",
}
SOURCE = "\n".join(["import triton", "import triton.language as tl", "", "", "@triton.jit",
                    "def k(x_ptr, w_ptr, out_ptr, n_elements, N, BLOCK: tl.constexpr):"]
                   + ["    " + SOURCE_LINES.get(i, "pass") for i in range(7, 22)]
                   + ["", "TOLERANCE = {torch.float32: {'atol': 1e-2, 'rtol': 1e-2}}", ""])


def kir(texts: dict[str, str], *, name="k", grid=(4096, 1, 1), num_warps=4, num_stages=3, resources=None,
        source=SOURCE, index=0) -> KernelIR:
    res = {"registers": 32, "spill_store_bytes": 0, "spill_load_bytes": 0, "shared_bytes": 0, **(resources or {})}
    record = {"index": index, "kernel": name, "grid": list(grid),
              "options": {"num_warps": num_warps, "num_stages": num_stages, "num_ctas": 1},
              "metadata": {"shared": res["shared_bytes"]}, "resources": res, "stages": {}}
    return KernelIR(record=record, source=source, arch=90, texts=texts, source_path=SRC_PATH)


def fire(det_id: str, *kernels: KernelIR):
    return REGISTRY[det_id].run_capture(list(kernels))


LOCS = f'''#loc = loc({F}:6:0)
#loc1 = loc(unknown)
#loc7 = loc({F}:7:24)
#loc8 = loc({F}:8:17)
#loc9 = loc({F}:9:18)
#loc10 = loc({F}:10:16)
#loc11 = loc({F}:11:16)
#loc12 = loc({F}:12:29)
#loc13 = loc({F}:13:25)
#loc14 = loc({F}:14:20)
#loc15 = loc({F}:15:25)
#loc16 = loc({F}:16:20)
#loc17 = loc({F}:17:27)
#loc18 = loc({F}:18:34)
#loc20 = loc({F}:20:14)
#loc30 = loc("pid"(#loc7))
#loc31 = loc("x"(#loc10))
'''

MODULE_HEAD = '''module attributes {"ttg.num-ctas" = 1 : i32, "ttg.num-warps" = 4 : i32, ttg.target = "cuda:90", "ttg.threads-per-warp" = 32 : i32} {'''


def vadd_ttgir(block=1024, spt=4, div=True, extra_ops="") -> str:
    d = " {tt.divisibility = 16 : i32}" if div else ""
    return f'''#blocked = #ttg.blocked<{{sizePerThread = [{spt}], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}}>
{MODULE_HEAD}
  tt.func public @k(%x_ptr: !tt.ptr<f32>{d} loc("x_ptr"(#loc)), %out_ptr: !tt.ptr<f32> {{tt.divisibility = 16 : i32}} loc("out_ptr"(#loc)), %n_elements: i32{d} loc("n_elements"(#loc))) attributes {{noinline = false}} {{
    %c{block}_i32 = arith.constant {block} : i32 loc(#loc1)
    %pid = tt.get_program_id x : i32 loc(#loc30)
    %offs = arith.muli %pid, %c{block}_i32 : i32 loc(#loc8)
    %offs_0 = tt.make_range {{end = {block} : i32, start = 0 : i32}} : tensor<{block}xi32, #blocked> loc(#loc8)
    %offs_1 = tt.splat %offs : i32 -> tensor<{block}xi32, #blocked> loc(#loc8)
    %offs_2 = arith.addi %offs_1, %offs_0 : tensor<{block}xi32, #blocked> loc(#loc8)
    %mask = tt.splat %n_elements : i32 -> tensor<{block}xi32, #blocked> loc(#loc9)
    %mask_3 = arith.cmpi slt, %offs_2, %mask : tensor<{block}xi32, #blocked> loc(#loc9)
    %x = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<{block}x!tt.ptr<f32>, #blocked> loc(#loc31)
    %x_4 = tt.addptr %x, %offs_2 : tensor<{block}x!tt.ptr<f32>, #blocked>, tensor<{block}xi32, #blocked> loc(#loc31)
    %x_5 = tt.load %x_4, %mask_3 : tensor<{block}x!tt.ptr<f32>, #blocked> loc(#loc31)
{extra_ops}    %0 = tt.splat %out_ptr : !tt.ptr<f32> -> tensor<{block}x!tt.ptr<f32>, #blocked> loc(#loc12)
    %1 = tt.addptr %0, %offs_2 : tensor<{block}x!tt.ptr<f32>, #blocked>, tensor<{block}xi32, #blocked> loc(#loc12)
    tt.store %1, %x_5, %mask_3 : tensor<{block}x!tt.ptr<f32>, #blocked> loc(#loc12)
    tt.return loc(#loc1)
  }} loc(#loc)
}} loc(#loc)
{LOCS}'''


def ptx(body: str) -> str:
    return f'''.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(
	.param .u64 .ptr .global .align 1 k_param_0
)
{{
{body}
	ret;
}}
	.file	1 "{SRC_PATH}"
'''


PTX_SCALAR = ptx('''	.loc	1 10 16                         // k.py:10:16
	@%p1 ld.global.b32 { %r1 }, [ %rd1 + 0 ];
	@%p2 ld.global.b32 { %r2 }, [ %rd2 + 0 ];
	@%p3 ld.global.b32 { %r3 }, [ %rd3 + 0 ];
	.loc	1 12 29                         // k.py:12:29
	@%p1 st.global.b32 [ %rd9 + 0 ], { %r9 };''')
PTX_VEC = ptx('''	.loc	1 10 16                         // k.py:10:16
	@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
	.loc	1 12 29                         // k.py:12:29
	@%p1 st.global.v4.b32 [ %rd3 + 0 ], { %r9, %r10, %r11, %r12 };''')


# ---------------------------------------------------------------------------------------------
# IR tier
# ---------------------------------------------------------------------------------------------

def test_non_vectorized_global_access():
    (f,) = fire("non_vectorized_global_access", kir({"ptx": PTX_SCALAR}))
    assert f.metric["width_bytes"] == 4 and f.source_line == 10 and f.source_text.startswith("x = tl.load")
    assert f.severity == "high" and "ld.global.b32" in f.ir_line
    assert not fire("non_vectorized_global_access", kir({"ptx": PTX_VEC}))


FMA_DOT_TTGIR = f'''#blocked = #ttg.blocked<{{sizePerThread = [4, 4], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0]}}>
#shared = #ttg.swizzled_shared<{{vec = 1, perPhase = 1, maxPhase = 1, order = [1, 0]}}>
#smem = #ttg.shared_memory
{MODULE_HEAD}
  tt.func public @k(%a_ptr: !tt.ptr<f32> {{tt.divisibility = 16 : i32}} loc("a_ptr"(#loc))) attributes {{noinline = false}} {{
    %a_20 = ttg.local_alloc : () -> !ttg.memdesc<2x128x32xf32, #shared, #smem, mutable> loc(#loc17)
    %a_72 = ttg.memdesc_index %a_20[%c0_i32] : !ttg.memdesc<2x128x32xf32, #shared, #smem, mutable> -> !ttg.memdesc<128x32xf32, #shared, #smem, mutable> loc(#loc17)
    %a_73 = ttg.local_load %a_72 token %a_71 : !ttg.memdesc<128x32xf32, #shared, #smem, mutable> -> tensor<128x32xf32, #ttg.dot_op<{{opIdx = 0, parent = #blocked}}>> loc(#loc14)
    %b_75 = ttg.local_load %b_74 token %a_71 : !ttg.memdesc<32x16xf32, #shared, #smem, mutable> -> tensor<32x16xf32, #ttg.dot_op<{{opIdx = 1, parent = #blocked}}>> loc(#loc16)
    %acc_76 = tt.dot %a_73, %b_75, %acc_60 : tensor<128x32xf32, #ttg.dot_op<{{opIdx = 0, parent = #blocked}}>> * tensor<32x16xf32, #ttg.dot_op<{{opIdx = 1, parent = #blocked}}>> -> tensor<128x16xf32, #blocked> loc(#loc17)
    tt.return loc(#loc1)
  }} loc(#loc)
}} loc(#loc)
{LOCS}'''
PTX_FMA = ptx('''	.loc	1 17 27                         // k.py:17:27
	fma.rn.f32 	%r300, %r12, %r44, %r300;''')
PTX_WGMMA = ptx('''	.loc	1 17 27                         // k.py:17:27
	wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%r1, %r2}, %rd1, %rd2, p, 1, 1, 0, 1;''')


def test_dot_not_tensor_core_ir_and_source():
    no_mul_sum = SOURCE.replace("acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)", "acc = acc * 1")
    (f,) = fire("dot_not_tensor_core", kir({"ttgir": FMA_DOT_TTGIR, "ptx": PTX_FMA}, source=no_mul_sum))
    assert f.source_line == 17 and "tt.dot" in f.ir_line and "CUDA cores" in f.message and f.stage == "ttgir"
    assert not fire("dot_not_tensor_core", kir({"ttgir": FMA_DOT_TTGIR, "ptx": PTX_WGMMA}, source=no_mul_sum))
    # the multiply-and-sum written in this kernel's source (line 19) is reported even when the compiler rescued it
    hits = fire("dot_not_tensor_core", kir({"ttgir": FMA_DOT_TTGIR, "ptx": PTX_WGMMA}))
    assert [(x.stage, x.source_line) for x in hits] == [("source", 19)] and "wgmma" in hits[0].message
    # another kernel of the same file does not inherit the finding
    two = SOURCE + "\n@triton.jit\ndef other(x_ptr):\n    tl.store(x_ptr, 1.0)\n"
    assert not fire("dot_not_tensor_core", kir({"ttgir": FMA_DOT_TTGIR, "ptx": PTX_WGMMA}, name="other", source=two))
    assert fire("dot_not_tensor_core", kir({"ttgir": FMA_DOT_TTGIR, "ptx": PTX_WGMMA}, name="k", source=two))


MMA_V2_TTGIR = f'''#mma = #ttg.nvidia_mma<{{versionMajor = 2, versionMinor = 0, warpsPerCTA = [1, 2], instrShape = [16, 8]}}>
{MODULE_HEAD}
  tt.func public @k(%a_ptr: !tt.ptr<f16> {{tt.divisibility = 16 : i32}} loc("a_ptr"(#loc))) attributes {{noinline = false}} {{
    %acc_46 = tt.dot %a_43, %b_45, %arg10, inputPrecision = tf32 : tensor<16x32xf16, #ttg.dot_op<{{opIdx = 0, parent = #mma, kWidth = 2}}>> * tensor<32x64xf16, #ttg.dot_op<{{opIdx = 1, parent = #mma, kWidth = 2}}>> -> tensor<16x64xf32, #mma> loc(#loc17)
    tt.return loc(#loc1)
  }} loc(#loc)
}} loc(#loc)
{LOCS}'''
PTX_MMA_V2 = ptx('''	.loc	1 17 27                         // k.py:17:27
	mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 { %r1, %r2, %r3, %r4 }, { %r5, %r6, %r7, %r8 }, { %r9, %r10 }, { %r1, %r2, %r3, %r4 };''')


def test_mma_v2_not_wgmma():
    (f,) = fire("mma_v2_not_wgmma", kir({"ttgir": MMA_V2_TTGIR, "ptx": PTX_MMA_V2}, num_warps=2))
    assert f.metric["mma_shape"] == "m16n8k16" and "M tile < 64" in f.message and "num_warps=2" in f.message
    assert f.source_line == 17
    assert not fire("mma_v2_not_wgmma", kir({"ttgir": MMA_V2_TTGIR, "ptx": PTX_WGMMA}))


UPCAST_TTGIR = f'''#mma = #ttg.nvidia_mma<{{versionMajor = 3, versionMinor = 0, warpsPerCTA = [4, 1], instrShape = [16, 64, 8]}}>
{MODULE_HEAD}
  tt.func public @k(%a_ptr: !tt.ptr<f16> {{tt.divisibility = 16 : i32}} loc("a_ptr"(#loc))) attributes {{noinline = false}} {{
    %a_74 = arith.extf %a_73 : tensor<64x32xf16, #ttg.dot_op<{{opIdx = 0, parent = #mma, kWidth = 1}}>> to tensor<64x32xf32, #ttg.dot_op<{{opIdx = 0, parent = #mma, kWidth = 1}}>> loc(#loc14)
    tt.return loc(#loc1)
  }} loc(#loc)
}} loc(#loc)
{LOCS}'''


def test_fp32_dot_operands():
    (f,) = fire("fp32_dot_operands", kir({"ttgir": UPCAST_TTGIR}))
    assert f.source_line == 14 and "arith.extf" in f.ir_line and f.metric["upcasts"] == 1
    assert not fire("fp32_dot_operands", kir({"ttgir": UPCAST_TTGIR.replace("xf16,", "xf32,")}))


def test_register_spills():
    spill = {"registers": 255, "spill_store_bytes": 1284, "spill_load_bytes": 1760, "stack_bytes": 1296}
    (f,) = fire("register_spills", kir({"ptx": PTX_VEC}, resources=spill))
    assert "1284 B stores" in f.message and f.metric["registers"] == 255
    assert not fire("register_spills", kir({"ptx": PTX_VEC}))


def test_low_occupancy():
    (f,) = fire("low_occupancy", kir({"ptx": PTX_VEC}, num_warps=1, grid=(264, 1, 1), resources={"registers": 255}))
    assert f.metric["limiter"] == "registers" and f.metric["occupancy"] < 0.25
    assert not fire("low_occupancy", kir({"ptx": PTX_VEC}, num_warps=4, resources={"registers": 32}))


def test_grid_too_small_and_tiny_programs_and_tail():
    ttgir = vadd_ttgir(block=128)
    (g,) = fire("grid_too_small", kir({"ttgir": ttgir}, grid=(48, 1, 1)))
    assert g.metric == {"programs": 48, "sms": 132} and g.severity == "high"
    assert not fire("grid_too_small", kir({"ttgir": ttgir}, grid=(4096, 1, 1)))
    (t,) = fire("tiny_programs", kir({"ttgir": ttgir}, grid=(32768, 1, 1), num_warps=1))
    assert t.metric["block_elements"] == 128
    assert not fire("tiny_programs", kir({"ttgir": vadd_ttgir(block=1024)}, grid=(32768, 1, 1)))
    # 16 warps, 24 registers: 4 programs per SM, 528 per wave; 600 programs = 1.14 waves
    (w,) = fire("tail_effect", kir({"ttgir": ttgir}, grid=(600, 1, 1), num_warps=16, resources={"registers": 24}))
    assert w.metric["per_wave"] == 528 and w.severity == "low"
    assert not fire("tail_effect", kir({"ttgir": ttgir}, grid=(1056, 1, 1), num_warps=16, resources={"registers": 24}))


def test_int64_index_arithmetic():
    ext = ("    %offs_64 = arith.extsi %offs_2 : tensor<1024xi32, #blocked> to tensor<1024xi64, #blocked> loc(#loc8)\n"
           "    %offs_65 = arith.addi %offs_64, %offs_64 : tensor<1024xi64, #blocked> loc(#loc8)\n")
    (f,) = fire("int64_index_arithmetic", kir({"ttgir": vadd_ttgir(extra_ops=ext)}))
    assert f.metric["ops"] == 2 and f.source_line == 8
    scalar = "    %p64 = arith.extsi %pid : i32 to i64 loc(#loc8)\n"   # scalar i64 math is cheap: not reported
    assert not fire("int64_index_arithmetic", kir({"ttgir": vadd_ttgir(extra_ops=scalar)}))


def test_atomics_in_hot_path():
    atom = "    %at = tt.atomic_rmw fadd, acq_rel, gpu, %out_ptr, %sum, %true : (!tt.ptr<f32>, f32, i1) -> f32 loc(#loc18)\n"
    (f,) = fire("atomics_in_hot_path", kir({"ttgir": vadd_ttgir(extra_ops=atom)}))
    assert f.source_line == 18 and f.metric["atomics"] == 1
    assert not fire("atomics_in_hot_path", kir({"ttgir": vadd_ttgir()}))


CVT = ("    %4 = ttg.convert_layout %r_25 : tensor<64xf32, #ttg.slice<{dim = 1, parent = #blocked}>> -> tensor<64xf32, #blocked> loc(#loc20)\n"
       "    %9 = ttg.convert_layout %c_26 : tensor<64xf32, #ttg.slice<{dim = 0, parent = #blocked}>> -> tensor<64xf32, #blocked> loc(#loc20)\n"
       "    %20 = ttg.convert_layout %10 : tensor<64x64xf32, #blocked> -> tensor<64x64xf32, #blocked> loc(#loc20)\n")


def test_excessive_layout_conversions():
    (f,) = fire("excessive_layout_conversions", kir({"ttgir": vadd_ttgir(extra_ops=CVT)}))
    assert f.metric["conversions"] == 3 and f.source_line == 20
    assert not fire("excessive_layout_conversions", kir({"ttgir": vadd_ttgir(extra_ops=CVT.split("\n", 1)[1])}))


LOOP_TTIR = f'''module {{
  tt.func public @k(%x_ptr: !tt.ptr<f32> {{tt.divisibility = 16 : i32}} loc("x_ptr"(#loc)), %N: i32 {{tt.divisibility = 16 : i32}} loc("N"(#loc))) attributes {{noinline = false}} {{
    %cst = arith.constant dense<0.000000e+00> : tensor<1024xf32> loc(#loc1)
    %c0_i32 = arith.constant 0 : i32 loc(#loc1)
    %c1024_i32 = arith.constant 1024 : i32 loc(#loc1)
    %cols = tt.make_range {{end = 1024 : i32, start = 0 : i32}} : tensor<1024xi32> loc(#loc13)
    %acc = scf.for %start = %c0_i32 to %N step %c1024_i32 iter_args(%acc_1 = %cst) -> (tensor<1024xf32>)  : i32 {{
      %cols_2 = tt.splat %start : i32 -> tensor<1024xi32> loc(#loc14)
      %cols_3 = arith.addi %cols_2, %cols : tensor<1024xi32> loc(#loc14)
      %m = tt.splat %N : i32 -> tensor<1024xi32> loc(#loc14)
      %m_4 = arith.cmpi slt, %cols_3, %m : tensor<1024xi32> loc(#loc14)
      %p = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>> loc(#loc14)
      %p_5 = tt.addptr %p, %cols_3 : tensor<1024x!tt.ptr<f32>>, tensor<1024xi32> loc(#loc14)
      %x = tt.load %p_5, %m_4, %cst : tensor<1024x!tt.ptr<f32>> loc(#loc14)
      %acc_6 = arith.addf %acc_1, %x : tensor<1024xf32> loc(#loc14)
      scf.yield %acc_6 : tensor<1024xf32> loc(#loc14)
    }} loc(#loc13)
    tt.return loc(#loc1)
  }} loc(#loc)
}} loc(#loc)
{LOCS}'''


def test_masked_loads_in_loop():
    (f,) = fire("masked_loads_in_loop", kir({"ttir": LOOP_TTIR}))
    assert f.source_line == 14 and f.stage == "ttir" and f.metric["masked_loads"] == 1
    unmasked = LOOP_TTIR.replace("tt.load %p_5, %m_4, %cst :", "tt.load %p_5 :")
    assert not fire("masked_loads_in_loop", kir({"ttir": unmasked}))
    # a masked load outside any loop is not this detector's business (a nested reduce region is no loop)
    reduce_only = LOOP_TTIR.replace("scf.for %start = %c0_i32 to %N step %c1024_i32 iter_args(%acc_1 = %cst) -> (tensor<1024xf32>)  : i32 {",
                                    '"tt.reduce"(%cst) <{axis = 0 : i32}> ({')
    assert not fire("masked_loads_in_loop", kir({"ttir": reduce_only}))


# ---------------------------------------------------------------------------------------------
# Dataflow detectors
# ---------------------------------------------------------------------------------------------

def test_missing_alignment_info():
    (f,) = [x for x in fire("missing_alignment_info", kir({"ttgir": vadd_ttgir(div=False), "ptx": PTX_SCALAR}))
            if x.source_line == 10]
    assert f.metric["arguments"] == "%x_ptr,%n_elements" and f.metric["ptx_bytes"] == 4
    assert f.severity == "high" and "tt.load" in f.ir_line
    # same IR with the JIT's divisibility: silent; divisibility missing but PTX already 16 bytes wide: silent
    assert not fire("missing_alignment_info", kir({"ttgir": vadd_ttgir(div=True), "ptx": PTX_SCALAR}))
    assert not fire("missing_alignment_info", kir({"ttgir": vadd_ttgir(div=False), "ptx": PTX_VEC}))


STRIDED_TTGIR = f'''#blocked = #ttg.blocked<{{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}}>
{MODULE_HEAD}
  tt.func public @k(%x_ptr: !tt.ptr<f32> {{tt.divisibility = 16 : i32}} loc("x_ptr"(#loc)), %M: i32 {{tt.divisibility = 16 : i32}} loc("M"(#loc)), %stride_m: i32 {{tt.divisibility = 16 : i32}} loc("stride_m"(#loc))) attributes {{noinline = false}} {{
    %c1024_i32 = arith.constant 1024 : i32 loc(#loc1)
    %pid = tt.get_program_id x : i32 loc(#loc30)
    %rows = arith.muli %pid, %c1024_i32 : i32 loc(#loc8)
    %rows_0 = tt.make_range {{end = 1024 : i32, start = 0 : i32}} : tensor<1024xi32, #blocked> loc(#loc8)
    %rows_1 = tt.splat %rows : i32 -> tensor<1024xi32, #blocked> loc(#loc8)
    %rows_2 = arith.addi %rows_1, %rows_0 : tensor<1024xi32, #blocked> loc(#loc8)
    %x = tt.splat %stride_m : i32 -> tensor<1024xi32, #blocked> loc(#loc10)
    %x_3 = arith.muli %rows_2, %x : tensor<1024xi32, #blocked> loc(#loc10)
    %x_4 = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>, #blocked> loc(#loc10)
    %x_5 = tt.addptr %x_4, %x_3 : tensor<1024x!tt.ptr<f32>, #blocked>, tensor<1024xi32, #blocked> loc(#loc10)
    %x_6 = tt.load %x_5 : tensor<1024x!tt.ptr<f32>, #blocked> loc(#loc31)
    tt.return loc(#loc1)
  }} loc(#loc)
}} loc(#loc)
{LOCS}'''


def test_uncoalesced_access():
    (f,) = fire("uncoalesced_access", kir({"ttgir": STRIDED_TTGIR}))
    assert f.source_line == 10 and f.metric["stride"] == "%stride_m" and f.severity == "high"
    # a constant stride of 2 f32 (8 bytes) wastes half of each line: still reported, at medium severity
    two = STRIDED_TTGIR.replace("%x = tt.splat %stride_m : i32 -> tensor<1024xi32, #blocked>",
                                "%x = arith.constant dense<2> : tensor<1024xi32, #blocked>")
    (g,) = fire("uncoalesced_access", kir({"ttgir": two}))
    assert g.metric["stride"] == "2" and g.severity == "medium"
    assert "interleaved pair" not in g.message
    # the same stride-2 load and a second one a single element further on: an interleaved pair (re/im), told so
    load = "    %x_6 = tt.load %x_5 : tensor<1024x!tt.ptr<f32>, #blocked> loc(#loc31)\n"
    pair = two.replace(load, load + (
        "    %one = arith.constant dense<1> : tensor<1024xi32, #blocked> loc(#loc10)\n"
        "    %x_7 = tt.addptr %x_5, %one : tensor<1024x!tt.ptr<f32>, #blocked>, tensor<1024xi32, #blocked> loc(#loc10)\n"
        "    %x_8 = tt.load %x_7 : tensor<1024x!tt.ptr<f32>, #blocked> loc(#loc31)\n"))
    assert pair != two
    (h,) = fire("uncoalesced_access", kir({"ttgir": pair}))
    assert h.metric["stride"] == "2" and "interleaved pair" in h.message and "tl.split" in h.message
    # a second load two elements on is no pair
    (i,) = fire("uncoalesced_access", kir({"ttgir": pair.replace("dense<1>", "dense<2>")}))
    assert "interleaved pair" not in i.message
    # unit stride: silent
    assert not fire("uncoalesced_access", kir({"ttgir": vadd_ttgir()}))


def test_uncoalesced_transposed_2d():
    t2 = f'''#blocked = #ttg.blocked<{{sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]}}>
{MODULE_HEAD}
  tt.func public @k(%x_ptr: !tt.ptr<f32> {{tt.divisibility = 16 : i32}} loc("x_ptr"(#loc)), %M: i32 loc("M"(#loc)), %sn: i32 {{tt.divisibility = 16 : i32}} loc("sn"(#loc))) attributes {{noinline = false}} {{
    %r = tt.make_range {{end = 64 : i32, start = 0 : i32}} : tensor<64xi32, #ttg.slice<{{dim = 1, parent = #blocked}}>> loc(#loc8)
    %rm = tt.splat %M : i32 -> tensor<64xi32, #ttg.slice<{{dim = 1, parent = #blocked}}>> loc(#loc8)
    %rw = arith.remsi %r, %rm : tensor<64xi32, #ttg.slice<{{dim = 1, parent = #blocked}}>> loc(#loc8)
    %re = tt.expand_dims %rw {{axis = 1 : i32}} : tensor<64xi32, #ttg.slice<{{dim = 1, parent = #blocked}}>> -> tensor<64x1xi32, #blocked> loc(#loc10)
    %c = tt.make_range {{end = 64 : i32, start = 0 : i32}} : tensor<64xi32, #ttg.slice<{{dim = 0, parent = #blocked}}>> loc(#loc8)
    %ce = tt.expand_dims %c {{axis = 0 : i32}} : tensor<64xi32, #ttg.slice<{{dim = 0, parent = #blocked}}>> -> tensor<1x64xi32, #blocked> loc(#loc10)
    %s = tt.splat %sn : i32 -> tensor<1x64xi32, #blocked> loc(#loc10)
    %cs = arith.muli %ce, %s : tensor<1x64xi32, #blocked> loc(#loc10)
    %rb = tt.broadcast %re : tensor<64x1xi32, #blocked> -> tensor<64x64xi32, #blocked> loc(#loc10)
    %cb = tt.broadcast %cs : tensor<1x64xi32, #blocked> -> tensor<64x64xi32, #blocked> loc(#loc10)
    %o = arith.addi %rb, %cb : tensor<64x64xi32, #blocked> loc(#loc10)
    %p = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<64x64x!tt.ptr<f32>, #blocked> loc(#loc10)
    %pa = tt.addptr %p, %o : tensor<64x64x!tt.ptr<f32>, #blocked>, tensor<64x64xi32, #blocked> loc(#loc10)
    %x = tt.load %pa : tensor<64x64x!tt.ptr<f32>, #blocked> loc(#loc31)
    tt.return loc(#loc1)
  }} loc(#loc)
}} loc(#loc)
{LOCS}'''
    (f,) = fire("uncoalesced_access", kir({"ttgir": t2}))
    assert f.metric["contiguous_dim"] == 0 and f.metric["order"] == "[1, 0]" and "modulo" in f.message


def test_a_lane_that_holds_its_whole_run_is_coalesced():
    """A [256, 2] tile of pairs (deinterleave's ``[..., 2]`` tile): rows 2 elements apart, each lane holding both
    elements of its row (sizePerThread [1, 2]): consecutive lanes read consecutive 8-byte runs, one contiguous warp
    access (cuda:90 PTX ``ld.global.v2.b32``), not a transposed one."""
    def pairs(spt: str) -> str:
        return f'''#blocked = #ttg.blocked<{{sizePerThread = {spt}, threadsPerWarp = [32, 1], warpsPerCTA = [4, 1], order = [1, 0]}}>
{MODULE_HEAD}
  tt.func public @k(%x_ptr: !tt.ptr<f32> {{tt.divisibility = 16 : i32}} loc("x_ptr"(#loc))) attributes {{noinline = false}} {{
    %r = tt.make_range {{end = 256 : i32, start = 0 : i32}} : tensor<256xi32, #ttg.slice<{{dim = 1, parent = #blocked}}>> loc(#loc8)
    %two = arith.constant dense<2> : tensor<256xi32, #ttg.slice<{{dim = 1, parent = #blocked}}>> loc(#loc8)
    %r2 = arith.muli %r, %two : tensor<256xi32, #ttg.slice<{{dim = 1, parent = #blocked}}>> loc(#loc8)
    %re = tt.expand_dims %r2 {{axis = 1 : i32}} : tensor<256xi32, #ttg.slice<{{dim = 1, parent = #blocked}}>> -> tensor<256x1xi32, #blocked> loc(#loc10)
    %c = tt.make_range {{end = 2 : i32, start = 0 : i32}} : tensor<2xi32, #ttg.slice<{{dim = 0, parent = #blocked}}>> loc(#loc8)
    %ce = tt.expand_dims %c {{axis = 0 : i32}} : tensor<2xi32, #ttg.slice<{{dim = 0, parent = #blocked}}>> -> tensor<1x2xi32, #blocked> loc(#loc10)
    %rb = tt.broadcast %re : tensor<256x1xi32, #blocked> -> tensor<256x2xi32, #blocked> loc(#loc10)
    %cb = tt.broadcast %ce : tensor<1x2xi32, #blocked> -> tensor<256x2xi32, #blocked> loc(#loc10)
    %o = arith.addi %rb, %cb : tensor<256x2xi32, #blocked> loc(#loc10)
    %p = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<256x2x!tt.ptr<f32>, #blocked> loc(#loc10)
    %pa = tt.addptr %p, %o : tensor<256x2x!tt.ptr<f32>, #blocked>, tensor<256x2xi32, #blocked> loc(#loc10)
    %x = tt.load %pa : tensor<256x2x!tt.ptr<f32>, #blocked> loc(#loc31)
    tt.return loc(#loc1)
  }} loc(#loc)
}} loc(#loc)
{LOCS}'''
    assert not fire("uncoalesced_access", kir({"ttgir": pairs("[1, 2]")}))
    # one element per lane: lanes 2 elements apart, each reading one of them: reported
    (f,) = fire("uncoalesced_access", kir({"ttgir": pairs("[1, 1]")}))
    assert f.metric["stride"] == "2"


DOT_TTIR = f'''module {{
  tt.func public @k(%a_ptr: !tt.ptr<f32> {{tt.divisibility = 16 : i32}} loc("a_ptr"(#loc))) attributes {{noinline = false}} {{
    %acc_28 = tt.dot %a_18, %b_27, %acc_7 : tensor<128x32xf32> * tensor<32x16xf32> -> tensor<128x16xf32> loc(#loc17)
    tt.return loc(#loc1)
  }} loc(#loc)
}} loc(#loc)
{LOCS}'''


def test_fp32_dot_without_tf32():
    (f,) = fire("fp32_dot_without_tf32", kir({"ttir": DOT_TTIR}))
    assert f.source_line == 17 and f.metric["input_precision"] == "ieee" and f.metric["rtol"] == 0.01
    assert f.severity == "high" and f.stage == "ttir"
    tf32 = DOT_TTIR.replace("%acc_7 :", "%acc_7, inputPrecision = tf32 :")
    assert not fire("fp32_dot_without_tf32", kir({"ttir": tf32}))
    f16 = DOT_TTIR.replace("xf32> *", "xf16> *").replace("x16xf32> ->", "x16xf16> ->")
    assert not fire("fp32_dot_without_tf32", kir({"ttir": f16.replace("tensor<32x16xf32>", "tensor<32x16xf16>")}))
    tight = SOURCE.replace("'rtol': 1e-2", "'rtol': 1e-5")   # the task needs full fp32: ieee is right
    assert not fire("fp32_dot_without_tf32", kir({"ttir": DOT_TTIR}, source=tight))
    x3 = DOT_TTIR.replace("%acc_7 :", "%acc_7, inputPrecision = tf32x3 :")
    assert fire("fp32_dot_without_tf32", kir({"ttir": x3}))[0].metric["input_precision"] == "tf32x3"


REDUNDANT_TTGIR = f'''#blocked = #ttg.blocked<{{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}}>
{MODULE_HEAD}
  tt.func public @k(%x_ptr: !tt.ptr<f32> {{tt.divisibility = 16 : i32}} loc("x_ptr"(#loc)), %w_ptr: !tt.ptr<f32> {{tt.divisibility = 16 : i32}} loc("w_ptr"(#loc)), %out_ptr: !tt.ptr<f32> {{tt.divisibility = 16 : i32}} loc("out_ptr"(#loc)), %N: i32 {{tt.divisibility = 16 : i32}} loc("N"(#loc))) attributes {{noinline = false}} {{
    %row = tt.get_program_id x : i32 loc(#loc30)
    %cols = tt.make_range {{end = 2048 : i32, start = 0 : i32}} : tensor<2048xi32, #blocked> loc(#loc8)
    %w = tt.splat %w_ptr : !tt.ptr<f32> -> tensor<2048x!tt.ptr<f32>, #blocked> loc(#loc11)
    %w_1 = tt.addptr %w, %cols : tensor<2048x!tt.ptr<f32>, #blocked>, tensor<2048xi32, #blocked> loc(#loc11)
    %w_2 = tt.load %w_1 : tensor<2048x!tt.ptr<f32>, #blocked> loc(#loc11)
    %x = arith.muli %row, %N : i32 loc(#loc10)
    %x_3 = tt.addptr %x_ptr, %x : !tt.ptr<f32>, i32 loc(#loc10)
    %x_4 = tt.splat %x_3 : !tt.ptr<f32> -> tensor<2048x!tt.ptr<f32>, #blocked> loc(#loc10)
    %x_5 = tt.addptr %x_4, %cols : tensor<2048x!tt.ptr<f32>, #blocked>, tensor<2048xi32, #blocked> loc(#loc10)
    %x_6 = tt.load %x_5 : tensor<2048x!tt.ptr<f32>, #blocked> loc(#loc31)
    %0 = tt.addptr %out_ptr, %x : !tt.ptr<f32>, i32 loc(#loc12)
    %1 = tt.splat %0 : !tt.ptr<f32> -> tensor<2048x!tt.ptr<f32>, #blocked> loc(#loc12)
    %2 = tt.addptr %1, %cols : tensor<2048x!tt.ptr<f32>, #blocked>, tensor<2048xi32, #blocked> loc(#loc12)
    %3 = arith.mulf %x_6, %w_2 : tensor<2048xf32, #blocked> loc(#loc12)
    tt.store %2, %3 : tensor<2048x!tt.ptr<f32>, #blocked> loc(#loc12)
    tt.return loc(#loc1)
  }} loc(#loc)
}} loc(#loc)
{LOCS}'''


def test_redundant_recomputation():
    found = fire("redundant_recomputation", kir({"ttgir": REDUNDANT_TTGIR}, grid=(4096, 4, 1)))
    axis = [f for f in found if "axis" in f.metric]
    inv = [f for f in found if "invariant_bytes" in f.metric]
    assert axis and axis[0].metric == {"axis": 1, "programs_on_axis": 4} and axis[0].source_line == 12
    assert inv and inv[0].source_line == 11 and inv[0].metric["invariant_bytes"] == 8192
    # one-dimensional grid: the unused-axis finding goes away, the shared weight block stays
    found1 = fire("redundant_recomputation", kir({"ttgir": REDUNDANT_TTGIR}, grid=(4096, 1, 1)))
    assert [f.source_line for f in found1] == [11]
    assert not fire("redundant_recomputation", kir({"ttgir": vadd_ttgir()}))
    assert not fire("redundant_recomputation", kir({"ttgir": REDUNDANT_TTGIR}, grid=(1, 1, 1)))


TWO_LOOPS_TTGIR = f'''#blocked = #ttg.blocked<{{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}}>
{MODULE_HEAD}
  tt.func public @k(%x_ptr: !tt.ptr<f32> {{tt.divisibility = 16 : i32}} loc("x_ptr"(#loc)), %N: i32 {{tt.divisibility = 16 : i32}} loc("N"(#loc))) attributes {{noinline = false}} {{
    %cst = arith.constant dense<0.000000e+00> : tensor<1024xf32, #blocked> loc(#loc1)
    %c0_i32 = arith.constant 0 : i32 loc(#loc1)
    %c1024_i32 = arith.constant 1024 : i32 loc(#loc1)
    %cols = tt.make_range {{end = 1024 : i32, start = 0 : i32}} : tensor<1024xi32, #blocked> loc(#loc8)
    %base = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>, #blocked> loc(#loc8)
    %acc = scf.for %s = %c0_i32 to %N step %c1024_i32 iter_args(%arg6 = %cst) -> (tensor<1024xf32, #blocked>)  : i32 {{
      %cols_11 = tt.splat %s : i32 -> tensor<1024xi32, #blocked> loc(#loc14)
      %cols_12 = arith.addi %cols_11, %cols : tensor<1024xi32, #blocked> loc(#loc14)
      %x = tt.addptr %base, %cols_12 : tensor<1024x!tt.ptr<f32>, #blocked>, tensor<1024xi32, #blocked> loc(#loc14)
      %x_13 = tt.load %x : tensor<1024x!tt.ptr<f32>, #blocked> loc(#loc14)
      %a = arith.addf %arg6, %x_13 : tensor<1024xf32, #blocked> loc(#loc14)
      scf.yield %a : tensor<1024xf32, #blocked> loc(#loc14)
    }} loc(#loc13)
    %acc2 = scf.for %s = %c0_i32 to %N step %c1024_i32 iter_args(%arg6 = %cst) -> (tensor<1024xf32, #blocked>)  : i32 {{
      %cols_11 = tt.splat %s : i32 -> tensor<1024xi32, #blocked> loc(#loc16)
      %cols_12 = arith.addi %cols_11, %cols : tensor<1024xi32, #blocked> loc(#loc16)
      %x = tt.addptr %base, %cols_12 : tensor<1024x!tt.ptr<f32>, #blocked>, tensor<1024xi32, #blocked> loc(#loc16)
      %x_13 = tt.load %x : tensor<1024x!tt.ptr<f32>, #blocked> loc(#loc16)
      %a = arith.mulf %x_13, %x_13 : tensor<1024xf32, #blocked> loc(#loc16)
      %b = arith.addf %arg6, %a : tensor<1024xf32, #blocked> loc(#loc16)
      scf.yield %b : tensor<1024xf32, #blocked> loc(#loc16)
    }} loc(#loc15)
    tt.return loc(#loc1)
  }} loc(#loc)
}} loc(#loc)
{LOCS}'''


def test_multi_pass_reduction():
    (f,) = fire("multi_pass_reduction", kir({"ttgir": TWO_LOOPS_TTGIR}))
    assert f.metric == {"passes": 2, "argument": "%x_ptr"} and f.source_line == 14 and "14, 16" in f.message
    # nested loops over the same pointer are one pass, not two
    nested = TWO_LOOPS_TTGIR.replace("      scf.yield %a : tensor<1024xf32, #blocked> loc(#loc14)\n    } loc(#loc13)\n", "")
    nested = nested.replace("    } loc(#loc15)\n", "    } loc(#loc15)\n      scf.yield %a : tensor<1024xf32, #blocked> loc(#loc14)\n    } loc(#loc13)\n")
    assert not fire("multi_pass_reduction", kir({"ttgir": nested}))
    assert not fire("multi_pass_reduction", kir({"ttgir": vadd_ttgir()}))


def test_multi_pass_reduction_not_for_the_two_arms_of_one_if():
    """The loops of an EVEN fast path and its masked twin (the then/else regions of one scf.if) run one
    or the other, never both: one pass each way (issue 18 point 11)."""
    head = "    %acc = scf.for %s = %c0_i32 to %N step %c1024_i32"
    second = "    %acc2 = scf.for %s = %c0_i32 to %N step %c1024_i32"
    branched = (TWO_LOOPS_TTGIR
                .replace(head, "    %even = arith.cmpi eq, %N, %c0_i32 : i32 loc(#loc1)\n    scf.if %even {\n" + head)
                .replace("    } loc(#loc13)\n", "    } loc(#loc13)\n    } else {\n")
                .replace("    } loc(#loc15)\n", "    } loc(#loc15)\n    } loc(#loc1)\n"))
    assert "} else {" in branched and second in branched
    assert not fire("multi_pass_reduction", kir({"ttgir": branched}))
    # the same two loops both inside the then region: still two passes
    both_then = branched.replace("    } loc(#loc13)\n    } else {\n", "    } loc(#loc13)\n")
    assert len(fire("multi_pass_reduction", kir({"ttgir": both_then}))) == 1


def test_shared_memory_bank_conflicts():
    (f,) = fire("shared_memory_bank_conflicts", kir({"ttgir": FMA_DOT_TTGIR}))
    assert f.metric == {"ways": 8, "lanes": 8, "row_bytes": 128} and f.source_line == 14
    assert "ttg.local_load" in f.ir_line
    swizzled = FMA_DOT_TTGIR.replace("vec = 1, perPhase = 1, maxPhase = 1", "vec = 4, perPhase = 1, maxPhase = 8")
    assert not fire("shared_memory_bank_conflicts", kir({"ttgir": swizzled}))
    # two lanes per column (threadsPerWarp = [2, 16]): a 2-way conflict is below the threshold
    narrow = FMA_DOT_TTGIR.replace("threadsPerWarp = [8, 4]", "threadsPerWarp = [2, 16]")
    assert not fire("shared_memory_bank_conflicts", kir({"ttgir": narrow}))


def test_launch_overhead_dominating():
    small = [kir({"ttgir": vadd_ttgir()}, grid=(4, 1, 1), index=i, source=SOURCE) for i in range(3)]
    (f,) = fire("launch_overhead_dominating", *small)
    assert f.metric["launches"] == 3 and f.metric["small_launches"] == 3 and f.source_line == 21
    assert not fire("launch_overhead_dominating", small[0])                       # one launch
    big = [kir({"ttgir": vadd_ttgir()}, grid=(65536, 1, 1), index=i) for i in range(3)]
    assert not fire("launch_overhead_dominating", *big)                           # each moves 512 MB
    assert not fire("launch_overhead_dominating", kir({"ttgir": TWO_LOOPS_TTGIR}, grid=(4, 1, 1)),
                    kir({"ttgir": TWO_LOOPS_TTGIR}, grid=(4, 1, 1), index=1))     # loops: work unknown


def test_run_detectors_handles_capture_scope():
    small = [kir({"ttgir": vadd_ttgir()}, grid=(4, 1, 1), index=i) for i in range(3)]
    found = [f for f in run_detectors(small, "ir") if f.detector == "launch_overhead_dominating"]
    assert len(found) == 1


def test_shared_memory_occupancy():
    ttgir = FMA_DOT_TTGIR
    (f,) = fire("shared_memory_occupancy", kir({"ttgir": ttgir}, resources={"shared_bytes": 196608}))
    assert f.metric == {"shared_bytes": 196608, "programs_per_sm": 1} and "ttg.local_alloc" in f.ir_line
    (g,) = fire("shared_memory_occupancy", kir({"ttgir": ttgir}, resources={"shared_bytes": 240000}))
    assert g.severity == "high" and "OutOfResources" in g.message
    assert not fire("shared_memory_occupancy", kir({"ttgir": ttgir}, resources={"shared_bytes": 98304}))
    assert not fire("shared_memory_occupancy", kir({"ttgir": ttgir}))


# ---------------------------------------------------------------------------------------------
# Compiler tier
# ---------------------------------------------------------------------------------------------

ASYNC_TTGIR = f'''#blocked = #ttg.blocked<{{sizePerThread = [1, 8], threadsPerWarp = [8, 4], warpsPerCTA = [8, 1], order = [1, 0]}}>
#shared = #ttg.nvmma_shared<{{swizzlingByteWidth = 128, transposed = false, elementBitWidth = 16}}>
#smem = #ttg.shared_memory
{MODULE_HEAD}
  tt.func public @k(%a_ptr: !tt.ptr<f16> {{tt.divisibility = 16 : i32}} loc("a_ptr"(#loc)), %a_desc: !tt.tensordesc<tensor<128x64xf16, #shared>> loc("a_desc"(#loc)), %K: i32 {{tt.divisibility = 16 : i32}} loc("K"(#loc))) attributes {{noinline = false}} {{
    %c0_i32 = arith.constant 0 : i32 loc(#loc1)
    %c64_i32 = arith.constant 64 : i32 loc(#loc1)
    %acc:2 = scf.for %k = %c0_i32 to %K step %c64_i32 iter_args(%arg1 = %c0_i32, %arg2 = %c0_i32) -> (i32, i32)  : i32 {{
      %a_90 = ttg.async_copy_global_to_local %a_87, %a_88 mask %acc_89 {{contiguity = 8 : i32}} : tensor<128x64x!tt.ptr<f16>, #blocked> -> <128x64xf16, #shared, #smem, mutable> loc(#loc14)
      ttng.async_tma_copy_global_to_local %a_desc[%a, %k] %a_44, %acc_43, %acc_29 : !tt.tensordesc<tensor<128x64xf16, #shared>>, !ttg.memdesc<1xi64, #shared, #smem, mutable> -> !ttg.memdesc<128x64xf16, #shared, #smem, mutable> loc(#loc16)
      scf.yield %arg1, %arg2 : i32, i32 loc(#loc13)
    }} loc(#loc13)
    tt.return loc(#loc1)
  }} loc(#loc)
}} loc(#loc)
{LOCS}'''


def test_async_load_path():
    (f,) = fire("async_load_path", kir({"ttgir": ASYNC_TTGIR, "ptx": PTX_VEC}))
    assert f.severity == "info" and f.metric["tma"] == 1 and f.metric["cp_async"] == 1 and f.metric["plain"] == 0
    assert f.tier == "compiler" and f.source_line in (14, 16)
    (p,) = fire("async_load_path", kir({"ttgir": LOOP_TTIR.replace("tensor<1024x!tt.ptr<f32>>",
                                                                   "tensor<1024x!tt.ptr<f32>, #blocked>")}))
    assert p.severity == "low" and p.metric["plain"] == 1
    assert not fire("async_load_path", kir({"ttgir": vadd_ttgir()}))  # no loop


def dump(name: str, arg: str, body: str) -> str:
    return f"// -----// IR Dump Before {name} ({arg}) ('builtin.module' operation) //----- //\n{body}\n"


BLOCKED1 = "#blocked = #ttg.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>"
BLOCKED4 = "#blocked = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>"


def test_coalesce_layout():
    body = vadd_ttgir(spt=1)
    passes = dump("TritonGPUCoalesce", "tritongpu-coalesce", body) + dump("TritonGPUF32DotTC", "tritongpu-F32DotTC", body)
    (f,) = fire("coalesce_layout", kir({"passes": passes}))
    assert f.metric["size_per_thread"] == "1" and f.source_line == 10 and f.stage == "passes"
    good = dump("TritonGPUCoalesce", "tritongpu-coalesce", body) + dump("TritonGPUF32DotTC", "tritongpu-F32DotTC",
                                                                        vadd_ttgir(spt=4))
    assert not fire("coalesce_layout", kir({"passes": good}))


def test_accelerate_matmul_result():
    before = FMA_DOT_TTGIR
    passes = dump("TritonGPUAccelerateMatmul", "tritongpu-accelerate-matmul", before) + \
        dump("TritonGPURemoveLayoutConversions", "tritongpu-remove-layout-conversions", MMA_V2_TTGIR)
    (f,) = fire("accelerate_matmul_result", kir({"passes": passes}))
    assert f.metric["mma_version"] == "2" and f.source_line == 17
    wg = MMA_V2_TTGIR.replace("versionMajor = 2", "versionMajor = 3")
    ok = dump("TritonGPUAccelerateMatmul", "tritongpu-accelerate-matmul", before) + \
        dump("TritonGPURemoveLayoutConversions", "tritongpu-remove-layout-conversions", wg)
    assert not fire("accelerate_matmul_result", kir({"passes": ok}))


def test_unpipelined_loop():
    loop = LOOP_TTIR.replace("tensor<1024x!tt.ptr<f32>>", "tensor<1024x!tt.ptr<f32>, #blocked>")
    loop = BLOCKED4 + "\n" + loop
    passes = (dump("TritonGPUPipeline", "tritongpu-pipeline", loop)
              + "// -----// SoftwarePipeliner internal IR Dump After: LowerLoops\nmodule {\n}\n"
              + dump("Canonicalizer", "canonicalize", loop))
    (f,) = fire("unpipelined_loop", kir({"passes": passes}))
    assert f.metric["plain_loads"] == 1 and f.source_line == 14
    piped = loop.replace("%x = tt.load %p_5, %m_4, %cst : tensor<1024x!tt.ptr<f32>, #blocked>",
                         "%x = ttg.async_copy_global_to_local %p_5, %buf mask %m_4 : tensor<1024x!tt.ptr<f32>, #blocked> -> <1024xf32, #shared, #smem, mutable>")
    ok = dump("TritonGPUPipeline", "tritongpu-pipeline", loop) + dump("Canonicalizer", "canonicalize", piped)
    assert not fire("unpipelined_loop", kir({"passes": ok}))


def test_layout_conversions_survived():
    body = vadd_ttgir(extra_ops=CVT)
    passes = dump("TritonGPURemoveLayoutConversions", "tritongpu-remove-layout-conversions", body) + \
        dump("TritonGPUOptimizeThreadLocality", "tritongpu-optimize-thread-locality", body)
    (f,) = fire("layout_conversions_survived", kir({"passes": passes}))
    assert f.metric == {"before": 3, "after": 3} and f.source_line == 20
    ok = dump("TritonGPURemoveLayoutConversions", "tritongpu-remove-layout-conversions", body) + \
        dump("TritonGPUOptimizeThreadLocality", "tritongpu-optimize-thread-locality", vadd_ttgir())
    assert not fire("layout_conversions_survived", kir({"passes": ok}))


def test_pass_changes_and_summary():
    loop = BLOCKED4 + "\n" + LOOP_TTIR.replace("tensor<1024x!tt.ptr<f32>>", "tensor<1024x!tt.ptr<f32>, #blocked>")
    piped = loop.replace("iter_args(%acc_1 = %cst) -> (tensor<1024xf32>)",
                         "iter_args(%acc_1 = %cst, %i = %c0_i32) -> (tensor<1024xf32>, i32)")
    renamed = piped.replace("%cols", "%c").replace("loc(#loc14)", "loc(#loc13)")      # renames only
    passes = (dump("TritonGPUCoalesce", "tritongpu-coalesce", loop.replace(BLOCKED4, BLOCKED1))
              + dump("TritonGPUPipeline", "tritongpu-pipeline", loop)
              + dump("Canonicalizer", "canonicalize", piped)
              + dump("CSE", "cse", renamed))
    k = kir({"passes": passes})
    changes = pass_changes(k)
    assert [n for n, _ in changes] == ["TritonGPUCoalesce", "TritonGPUPipeline", "Canonicalizer"]
    # the layout change shows on the three ops that use #blocked; the pipeliner's change on the loop header
    assert changes[0][1] == 3 and changes[1][1] == 1 and changes[2][1] == 0
    (f,) = fire("pass_summary", k)
    assert f.severity == "info" and f.metric["loop_passes"] == "TritonGPUPipeline"
    assert f.metric["layout_passes"] == "TritonGPUCoalesce"
    still = dump("CSE", "cse", loop) + dump("Canonicalizer", "canonicalize", loop)
    assert pass_changes(kir({"passes": still})) == [("CSE", 0)]
    assert not fire("pass_summary", kir({"passes": still}))


# ---------------------------------------------------------------------------------------------
# The catalog itself
# ---------------------------------------------------------------------------------------------

def test_catalog_table():
    rows = catalog_table("cuda")
    assert len(rows) >= 22 and len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert set(r) == {"id", "tier", "targets", "stages", "suggests", "description"} and r["targets"] == ["cuda"]
        assert r["tier"] in ("ir", "compiler") and r["stages"] and r["description"]
        assert set(r["suggests"]) <= set(REWRITE_FAMILIES)
    existing = {"non_vectorized_global_access", "dot_not_tensor_core", "mma_v2_not_wgmma", "fp32_dot_operands",
                "register_spills", "low_occupancy", "grid_too_small", "tail_effect", "tiny_programs",
                "int64_index_arithmetic", "atomics_in_hot_path", "excessive_layout_conversions",
                "masked_loads_in_loop", "coalesce_layout", "accelerate_matmul_result", "unpipelined_loop",
                "layout_conversions_survived"}
    assert existing <= {r["id"] for r in rows}


def test_detector_refuses_unknown_family():
    from tritondx.tools.ir.registry import detector
    with pytest.raises(ValueError):
        detector("x", "ir", ("ttgir",), ("not_a_family",), "d", targets=("cuda",))(lambda det, k: [])


def test_regexes_are_module_constants_with_examples():
    """Every compiled regex of the IR readers and of both detector catalogs (tools/ir, the Ascend IR view and
    detectors in tools/npu) is a module constant with an example IR line in the comment above."""
    import re as _re
    from pathlib import Path

    tools = Path(tritondx.tools.ir.detectors.__file__).parents[2]
    mods = sorted((tools / "ir").rglob("*.py")) + [tools / "npu" / "adapter_ir.py", tools / "npu" / "kernel.py"] \
        + sorted((tools / "npu" / "detectors").glob("*.py"))
    assert len(mods) > 10
    for path in mods:
        mod = path.name
        src = path.read_text().splitlines()
        for i, line in enumerate(src):
            m = _re.match(r"^(\w+) = re\.compile\(", line)
            if m:
                above = src[i - 1]
                assert above.startswith("#"), f"{mod}: {m.group(1)} has no example comment above it"
            assert not _re.search(r"^\s+\w+ = re\.compile\(", line), f"{mod}: regex compiled in a function: {line}"


def test_missing_alignment_on_async_copy_contiguity():
    """A pipelined load: the copy width comes from the contiguity the pipeliner recorded on the cp.async."""
    ttgir = f'''#blocked = #ttg.blocked<{{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}}>
#shared = #ttg.swizzled_shared<{{vec = 1, perPhase = 1, maxPhase = 1, order = [0]}}>
#smem = #ttg.shared_memory
{MODULE_HEAD}
  tt.func public @k(%x_ptr: !tt.ptr<f32> loc("x_ptr"(#loc)), %N: i32 {{tt.divisibility = 16 : i32}} loc("N"(#loc))) attributes {{noinline = false}} {{
    %c0_i32 = arith.constant 0 : i32 loc(#loc1)
    %c1024_i32 = arith.constant 1024 : i32 loc(#loc1)
    %cols = tt.make_range {{end = 1024 : i32, start = 0 : i32}} : tensor<1024xi32, #blocked> loc(#loc13)
    %base = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>, #blocked> loc(#loc13)
    scf.for %s = %c0_i32 to %N step %c1024_i32  : i32 {{
      %c = tt.splat %s : i32 -> tensor<1024xi32, #blocked> loc(#loc14)
      %o = arith.addi %c, %cols : tensor<1024xi32, #blocked> loc(#loc14)
      %p = tt.addptr %base, %o : tensor<1024x!tt.ptr<f32>, #blocked>, tensor<1024xi32, #blocked> loc(#loc14)
      %x = ttg.async_copy_global_to_local %p, %buf mask %m {{contiguity = 1 : i32}} : tensor<1024x!tt.ptr<f32>, #blocked> -> <1024xf32, #shared, #smem, mutable> loc(#loc14)
    }} loc(#loc13)
    tt.return loc(#loc1)
  }} loc(#loc)
}} loc(#loc)
{LOCS}'''
    (f,) = fire("missing_alignment_info", kir({"ttgir": ttgir, "ptx": PTX_VEC}))
    assert f.source_line == 14 and f.metric["arguments"] == "%x_ptr" and f.metric["ptx_bytes"] == 4
    assert "ttg.async_copy_global_to_local" in f.ir_line
    wide = ttgir.replace("{contiguity = 1 : i32}", "{contiguity = 4 : i32}")
    assert not fire("missing_alignment_info", kir({"ttgir": wide, "ptx": PTX_VEC}))
