"""The def-use view (tools/ir/ssa.py): scoping of reused names, loop-carried dependencies, strides."""

from __future__ import annotations

from tritondx.tools.ir.layouts import parse_layouts
from tritondx.tools.ir.ssa import build_funcs, display, kernel_func
from tritondx.tools.ir.strides import strides

# Shape copied from a real TTGIR (two sibling loops reuse %cols_11/%x; one pointer is loop-carried).
TTGIR = '''#blocked = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
#blocked1 = #ttg.blocked<{sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]}>
module attributes {"ttg.num-warps" = 4 : i32} {
  tt.func public @k(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("x_ptr"(#loc)), %N: i32 loc("N"(#loc)), %stride: i32 {tt.divisibility = 16 : i32} loc("stride"(#loc))) attributes {noinline = false} {
    %c0_i32 = arith.constant 0 : i32 loc(#loc1)
    %c1024_i32 = arith.constant 1024 : i32 loc(#loc1)
    %row = tt.get_program_id x : i32 loc(#loc2)
    %base = arith.muli %row, %stride : i32 loc(#loc2)
    %base_1 = tt.addptr %x_ptr, %base : !tt.ptr<f32>, i32 loc(#loc2)
    %cols = tt.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32, #blocked> loc(#loc2)
    %p = tt.splat %base_1 : !tt.ptr<f32> -> tensor<1024x!tt.ptr<f32>, #blocked> loc(#loc2)
    %acc = scf.for %i = %c0_i32 to %N step %c1024_i32 iter_args(%arg6 = %p) -> (tensor<1024x!tt.ptr<f32>, #blocked>)  : i32 {
      %cols_11 = tt.splat %i : i32 -> tensor<1024xi32, #blocked> loc(#loc3)
      %x = tt.addptr %arg6, %cols : tensor<1024x!tt.ptr<f32>, #blocked>, tensor<1024xi32, #blocked> loc(#loc3)
      %v = tt.load %x : tensor<1024x!tt.ptr<f32>, #blocked> loc(#loc3)
      %n = tt.addptr %arg6, %cols_11 : tensor<1024x!tt.ptr<f32>, #blocked>, tensor<1024xi32, #blocked> loc(#loc3)
      scf.yield %n : tensor<1024x!tt.ptr<f32>, #blocked> loc(#loc3)
    } loc(#loc3)
    scf.for %j = %c0_i32 to %N step %c1024_i32  : i32 {
      %cols_11 = arith.muli %cols, %cols : tensor<1024xi32, #blocked> loc(#loc4)
      %x = tt.addptr %p, %cols_11 : tensor<1024x!tt.ptr<f32>, #blocked>, tensor<1024xi32, #blocked> loc(#loc4)
      %w = tt.load %x : tensor<1024x!tt.ptr<f32>, #blocked> loc(#loc4)
    } loc(#loc4)
    %r = tt.expand_dims %cols {axis = 1 : i32} : tensor<1024xi32, #blocked> -> tensor<1024x1xi32, #blocked1> loc(#loc5)
    %s = tt.splat %stride : i32 -> tensor<1024x1xi32, #blocked1> loc(#loc5)
    %rs = arith.muli %r, %s : tensor<1024x1xi32, #blocked1> loc(#loc5)
    %c = tt.make_range {end = 4 : i32, start = 0 : i32} : tensor<4xi32, #blocked> loc(#loc5)
    %ce = tt.expand_dims %c {axis = 0 : i32} : tensor<4xi32, #blocked> -> tensor<1x4xi32, #blocked1> loc(#loc5)
    %rb = tt.broadcast %rs : tensor<1024x1xi32, #blocked1> -> tensor<1024x4xi32, #blocked1> loc(#loc5)
    %cb = tt.broadcast %ce : tensor<1x4xi32, #blocked1> -> tensor<1024x4xi32, #blocked1> loc(#loc5)
    %off = arith.addi %rb, %cb : tensor<1024x4xi32, #blocked1> loc(#loc5)
    %q = tt.splat %x_ptr : !tt.ptr<f32> -> tensor<1024x4x!tt.ptr<f32>, #blocked1> loc(#loc5)
    %qa = tt.addptr %q, %off : tensor<1024x4x!tt.ptr<f32>, #blocked1>, tensor<1024x4xi32, #blocked1> loc(#loc5)
    %t = tt.load %qa : tensor<1024x4x!tt.ptr<f32>, #blocked1> loc(#loc5)
    tt.return loc(#loc6)
  } loc(#loc)
} loc(#loc)
#loc = loc("/t/k.py":1:0)
#loc1 = loc(unknown)
#loc2 = loc("/t/k.py":3:1)
#loc3 = loc("/t/k.py":6:1)
#loc4 = loc("/t/k.py":9:1)
#loc5 = loc("/t/k.py":12:1)
#loc6 = loc("/t/k.py":13:1)
'''


def test_args_layouts_and_loops():
    f = kernel_func(TTGIR)
    assert f.name == "k" and [display(a) for a in f.args] == ["%x_ptr", "%N", "%stride"]
    assert f.args["x_ptr"].divisibility == 16 and f.args["N"].divisibility is None and f.args["N"].is_int
    assert parse_layouts(TTGIR)["#blocked1"].order == [1, 0]
    loads = f.loads()
    assert [op.src_line for op in loads] == [6, 9, 12]
    assert len(f.loop_ops()) == 2 and loads[0].loops != loads[1].loops and not loads[2].loops


def test_sibling_regions_reuse_names():
    f = kernel_func(TTGIR)
    l1, l2, _ = f.loads()
    # each loop's %x resolves to its own definition
    assert f.defs[f.address_operand(l1)].line.src_line == 6
    assert f.defs[f.address_operand(l2)].line.src_line == 9
    assert strides(f, f.address_operand(l1))[0].kind == "unit"
    assert strides(f, f.address_operand(l2))[0].kind == "irregular"   # cols * cols


def test_origins_through_loop_carried_values():
    f = kernel_func(TTGIR)
    l1 = f.loads()[0]
    assert f.arg_origins(f.address_operand(l1)) == {"x_ptr", "stride", "N"}  # iter arg: init and yield (%i from N)
    assert f.pid_axes(f.address_operand(l1)) == {"x"}
    t = f.loads()[2]
    assert f.pid_axes(f.address_operand(t)) == set()


def test_two_dim_strides():
    f = kernel_func(TTGIR)
    t = f.loads()[2]
    rows, cols = strides(f, f.address_operand(t))
    assert rows.kind == "scaled" and rows.factor is None and display(rows.by) == "%stride"
    assert cols.kind == "unit"
    pt = f.pointer_type(t)
    assert pt.shape == (1024, 4) and pt.elem_bytes == 4 and f.layout(pt).ints("sizePerThread") == [1, 4]


def test_multiple_functions_and_generic_ops():
    text = TTGIR.replace("tt.return loc(#loc6)\n  } loc(#loc)\n", "tt.return loc(#loc6)\n  } loc(#loc)\n"
                         "  tt.func private @helper(%a: i32 loc(unknown)) -> i32 {\n"
                         '    %0 = "tt.reduce"(%a) <{axis = 0 : i32}> ({\n'
                         "    ^bb0(%x: i32, %y: i32):\n"
                         "      %1 = arith.addi %x, %y : i32\n"
                         "      tt.reduce.return %1 : i32\n"
                         "    }) : (i32) -> i32\n"
                         "    tt.return %0 : i32\n  }\n")
    funcs = build_funcs(text)
    assert [f.name for f in funcs] == ["k", "helper"]
    h = funcs[1]
    assert [op.name for op in h.ops] == ["tt.reduce", "arith.addi", "tt.reduce.return", "tt.return"]
    assert h.ops[1].regions == (0,)
    assert kernel_func(text, name="helper").name == "helper"
