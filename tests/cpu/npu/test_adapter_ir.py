"""Parser tests on inline TTIR / adapter IR (no triton-ascend needed)."""

from tritondx.tools.ir.mlir import LOC_DEF_RE, OP_RE
from tritondx.tools.npu.adapter_ir import (
    memref_types,
    parse_adapter_ir,
    parse_ttir,
    tensor_types,
)

ADAPTER = '''#loc = loc("/work/t/k_gather.py":9:0)
#loc4 = loc("/work/t/k_gather.py":11:38)
#map = affine_map<(d0) -> (d0)>
module {
  func.func @gather_kernel(%arg0: memref<?xi8> loc("/work/t/k_gather.py":9:0), %arg2: memref<?xf32> {tt.divisibility = 16 : i32, tt.tensor_kind = 0 : i32} loc("/work/t/k_gather.py":9:0)) attributes {SyncBlockLockArgIdx = 0 : i64, global_kernel = "local", mix_mode = "aiv", parallel_mode = "simd"} {
    %c1024 = arith.constant 1024 : index loc(#loc1)
    %c1 = arith.constant 1 : index loc(#loc3)
    %c0 = arith.constant 0 : index loc(#loc3)
    %0 = tensor.empty() : tensor<1024xf32> loc(#loc3)
    %4 = linalg.generic {indexing_maps = [#map], iterator_types = ["parallel"]} outs(%3 : tensor<1024xi32>) {
    ^bb0(%out: i32 loc("/work/t/k_gather.py":11:38)):
      %19 = linalg.index 0 : index loc(#loc4)
      linalg.yield %20 : i32 loc(#loc4)
    } -> tensor<1024xi32> loc(#loc4)
    %alloc = memref.alloc() : memref<1024xi64> loc(#loc1)
    scf.if %15 {
      linalg.fill ins(%c0_i64 : i64) outs(%alloc : memref<1024xi64>) loc(#loc1)
    } {hivm.unlikely_condition} loc(#loc1)
    %17 = scf.for %arg12 = %c0 to %c1024 step %c1 iter_args(%arg13 = %0) -> (tensor<1024xf32>) {
      %extracted = tensor.extract %16[%arg12] {DiscreteMemAccess} : tensor<1024xi64> loc(#loc3)
      %reinterpret_cast_3 = memref.reinterpret_cast %arg2 to offset: [%19], sizes: [1], strides: [1] : memref<?xf32> to memref<1xf32, strided<[1], offset: ?>> loc(#loc3)
      %20 = memref.load %reinterpret_cast_3[%c0] : memref<1xf32, strided<[1], offset: ?>> loc(#loc3)
      %inserted = tensor.insert %20 into %arg13[%arg12] : tensor<1024xf32> loc(#loc3)
      scf.yield {DiscreteMemAccess} %inserted : tensor<1024xf32> loc(#loc3)
    } {ExtractedLoadOrStore} loc(#loc3)
    %11 = arith.index_cast %arg5 : i32 to index loc("/work/t/k_gather.py":13:15)
    return loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc1 = loc("/work/t/k_gather.py":13:18)
#loc3 = loc("/work/t/k_gather.py":14:16)
'''

TTIR_CALLSITE = '''#loc = loc("/work/t/task.py":12:0)
module {
  tt.func public @matmul_kernel(%arg0: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("/work/t/task.py":12:0)) attributes {noinline = false} {
    %66 = tt.dot %64, %65, %arg10, inputPrecision = tf32 : tensor<32x8xf32> * tensor<8x32xf32> -> tensor<32x32xf32> loc(#loc46)
    %67 = arith.addf %66, %66 : tensor<32x32xf32> loc(#loc47)
    %68 = arith.addf %67, %67 : tensor<32x32xf32> loc(#loc48)
    tt.return loc(#loc1)
  } loc(#loc)
} loc(#loc)
#loc1 = loc(unknown)
#loc32 = loc("/venv/lib/python3.11/site-packages/triton/language/standard.py":267:36)
#loc33 = loc("/work/t/task.py":26:22)
#loc46 = loc(callsite(#loc32 at #loc33))
#loc47 = loc(fused[#loc1, #loc33])
#loc48 = loc("acc"(#loc33))
'''


def test_regex_constants_match_their_examples():
    assert LOC_DEF_RE.match('#loc13 = loc("/work/task.py":9:4)').group(1) == "#loc13"
    m = OP_RE.match('%9 = tt.load %8, %6, %cst_0 : tensor<1024x!tt.ptr<i64>> loc(#loc8)')
    assert m.group("name") == "tt.load" and m.group("results") == "%9"
    m = OP_RE.match('%a, %b = "tt.reduce"(%x) <{axis = 0 : i32}> ({')
    assert m.group("name") == '"tt.reduce"'
    assert OP_RE.match("tt.store %14, %12, %6 : tensor<1024x!tt.ptr<f32>> loc(#loc12)").group("name") == "tt.store"


def test_ops_nesting_and_closing_line_attributes():
    ir = parse_adapter_ir(ADAPTER)
    assert ir.function_name == "gather_kernel"
    assert ir.mix_mode == "aiv" and ir.parallel_mode == "simd"
    loop = ir.find("scf.for")[0]
    assert "ExtractedLoadOrStore" in loop.attrs            # printed after the body
    body = [o.name for o in ir.descendants(loop)]
    assert body == ["tensor.extract", "memref.reinterpret_cast", "memref.load", "tensor.insert", "scf.yield"]
    extract = ir.find("tensor.extract")[0]
    assert "DiscreteMemAccess" in extract.attrs
    assert ir.enclosing_loops(extract) == [loop]
    pad = ir.find("scf.if")[0]
    assert "hivm.unlikely_condition" in pad.attrs and not ir.enclosing_loops(pad)
    assert [o.name for o in ir.descendants(pad)] == ["linalg.fill"]
    assert ir.trip_count(loop) == 1024


def test_locations_defined_before_and_after_the_module():
    ir = parse_adapter_ir(ADAPTER)
    extract = ir.find("tensor.extract")[0]
    assert ir.source_line(extract) == 14                    # #loc3 is defined at the bottom
    gen = ir.find("linalg.generic")[0]
    assert ir.source_line(gen) == 11                        # #loc4 is defined at the top
    cast = ir.find("arith.index_cast")[0]
    assert ir.source_line(cast) == 13                       # inline loc("file":line:col)
    assert ir.source_line(extract, "/work/t/k_gather.py") == 14
    assert ir.source_line(extract, "/elsewhere/other.py") is None


def test_callsite_fused_and_named_locations():
    ir = parse_ttir(TTIR_CALLSITE)
    dot = ir.find("tt.dot")[0]
    # the callee is in triton's standard library; the task line is the caller
    assert ir.source_line(dot) == 26
    assert ir.source_line(dot, "/work/t/task.py") == 26
    assert ir.source_of(dot).col == 22
    add1, add2 = ir.find("arith.addf")
    assert ir.source_line(add1) == 26                       # fused[unknown, #loc33]
    assert ir.source_line(add2) == 26                       # "acc"(#loc33)
    assert ir.source_line(ir.find("tt.return")[0]) is None  # loc(unknown)


def test_shaped_types():
    t = tensor_types("tensor<32x8xf32> * tensor<8x32xf32> -> tensor<1024x!tt.ptr<f32>>")
    assert [x.shape for x in t] == [(32, 8), (8, 32), (1024,)]
    assert t[0].bytes == 32 * 8 * 4 and t[2].element == "!tt.ptr<f32>"
    dyn = tensor_types("tensor<?x64xf16>")[0]
    assert dyn.shape == (None, 64) and dyn.bytes is None and str(dyn) == "tensor<?x64xf16>"
    m = memref_types("memref<1024xf32, strided<[1], offset: ?>>")[0]
    assert m.shape == (1024,) and m.bytes == 4096
    assert memref_types("memref<32x64xbf16>")[0].bytes == 32 * 64 * 2
