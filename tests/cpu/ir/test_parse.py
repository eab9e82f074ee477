"""Parsers of tools/ir/parse.py: MLIR location aliases (named, callsite, fused, inline), PTX .file/.loc
(inlined_at chains, line 0), SASS line comments, per-pass dump splitting; and the mapping on real IR."""

from __future__ import annotations

from pathlib import Path

from tritondx.tools.ir.context import KernelIR
from tritondx.tools.ir.parse import (
    RESOURCE_RE,
    is_triton_library,
    parse_mlir,
    parse_ptx,
    parse_sass,
    parse_stage,
    split_passes,
)

KERNELS = Path(__file__).parent / "kernels"
LIB = "/venv/lib/python3.11/site-packages/triton/language/standard.py"

MLIR = f'''#blocked = #ttg.blocked<{{sizePerThread = [2], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}}>
#loc = loc("/work/t/k.py":12:0)
#loc20 = loc("x_ptr"(#loc))
module attributes {{"ttg.num-warps" = 4 : i32}} {{
  tt.func public @k(%x_ptr: !tt.ptr<f32> {{tt.divisibility = 16 : i32}} loc("x_ptr"(#loc))) attributes {{noinline = false}} {{
    %row = tt.get_program_id x : i32 loc(#loc23)
    %x_8 = tt.load %x_7, %x_6, %cst : tensor<256x!tt.ptr<f32>, #blocked> loc(#loc31)
    %2 = arith.maxnumf %arg4, %arg5 : f32 loc(#loc35)
    tt.reduce.return %2 : f32 loc(#loc33)
    %3 = arith.addf %a, %b : f32 loc(callsite(#loc16 at #loc15))
    %4 = arith.addf %a, %b : f32 loc(fused[#loc1, #loc10])
    %5 = arith.mulf %a, %b : f32 loc(#loc16)
    %6 = arith.subf %a, %b : f32 loc(#loc1)
    %7 = arith.divf %a, %b : f32 loc(#loc40)
    tt.return loc("/work/t/k.py":20:4)
  }} loc(#loc)
}} loc(#loc)
#loc1 = loc(unknown)
#loc2 = loc("/work/t/k.py":13:24)
#loc10 = loc("/work/t/k.py":17:20)
#loc14 = loc("{LIB}":191:40)
#loc15 = loc("/work/t/k.py":19:35)
#loc16 = loc("{LIB}":170:27)
#loc23 = loc("row"(#loc2))
#loc31 = loc("x"(#loc10))
#loc33 = loc(callsite(#loc14 at #loc15))
#loc35 = loc(callsite(#loc16 at #loc33))
#loc40 = loc("y"("/work/t/k.py":18:2))
'''


def _by_op(mod, op):
    return next(ln for ln in mod.lines if op in ln.text)


def test_mlir_named_callsite_fused_and_inline_locations():
    mod = parse_mlir(MLIR, "ttgir")
    assert (_by_op(mod, "tt.get_program_id").src_file, _by_op(mod, "tt.get_program_id").src_line) == ("/work/t/k.py", 13)
    assert _by_op(mod, "tt.load").src_line == 17                      # named loc -> file loc
    # inlined tl.max: callsite(library at callsite(library at user)) -> the user's call line
    assert (_by_op(mod, "arith.maxnumf").src_file, _by_op(mod, "arith.maxnumf").src_line) == ("/work/t/k.py", 19)
    assert _by_op(mod, "tt.reduce.return").src_line == 19
    assert _by_op(mod, "arith.addf %a, %b : f32 loc(callsite").src_line == 19   # inline callsite
    assert _by_op(mod, "fused[").src_line == 17                        # fused: first resolvable member
    only_lib = _by_op(mod, "arith.mulf")                               # only library frames: keep the library
    assert only_lib.src_file == LIB and is_triton_library(only_lib.src_file)
    assert _by_op(mod, "arith.subf").src_line is None                  # unknown
    assert _by_op(mod, "arith.divf").src_line == 18                    # named loc with an inline file loc
    assert _by_op(mod, "tt.return").src_line == 20                     # inline file loc
    assert not any(ln.text.startswith("#") for ln in mod.lines)        # alias/layout definitions are not ops


def test_mlir_alias_chain_forward_reference_and_cycle():
    text = ('%0 = arith.addi %a, %b : i32 loc(#loc7)\n%1 = arith.addi %a, %b : i32 loc(#loc8)\n'
            '#loc7 = loc("n"(#loc6))\n#loc6 = loc("/t/k.py":5:1)\n#loc8 = loc("m"(#loc9))\n#loc9 = loc("o"(#loc8))\n')
    mod = parse_mlir(text, "ttir")
    assert mod.lines[0].src_line == 5
    assert mod.lines[1].src_line is None  # a cycle resolves to nothing instead of looping


PTX = f'''//
.visible .entry k(
	.param .u64 .ptr .global .align 1 k_param_0
)
{{
	.loc	1 14 17                         // k.py:14:17
	mov.u32 	%r1, %ctaid.x;
	.loc	1 16 16                         // k.py:16:16
	// begin inline asm
	@%p1 ld.global.v4.b32 {{ %r1, %r2, %r3, %r4 }}, [ %rd1 + 0 ];
	// end inline asm
	.loc	2 170 27                        // standard.py:170:27 @[ standard.py:191:40 @[ k.py:19:35 ] ]
	max.f32 	%r5, %r6, %r7;
	.loc	1 0 29                          // k.py:0:29
	mov.b32 	%r8, 0;
	.loc	2 191 40, function_name $L__info_string0, inlined_at 1 21 7 // standard.py:191:40
	shfl.sync.bfly.b32 	%r9, %r5, 16, 31, -1;
	ret;
}}
	.file	1 "/work/t/k.py"
	.file	2 "{LIB}"
'''


def test_ptx_file_table_loc_and_inlined_at():
    mod = parse_ptx(PTX)
    ld = _by_op(mod, "ld.global")
    assert (ld.src_file, ld.src_line) == ("/work/t/k.py", 16)   # file table at the end is resolved
    assert _by_op(mod, "mov.u32").src_line == 14
    mx = _by_op(mod, "max.f32")
    assert (mx.src_file, mx.src_line) == ("/work/t/k.py", 19)   # comment chain -> user's call site
    assert _by_op(mod, "mov.b32").src_line is None              # .loc line 0 = no line
    sh = _by_op(mod, "shfl.sync")
    assert (sh.src_file, sh.src_line) == ("/work/t/k.py", 21)   # inlined_at operand
    assert not any(ln.text.startswith(("//", ".loc", ".file")) for ln in mod.lines)


SASS = f'''	.section	.text.k,"ax",@progbits
k:
	//## File "/work/t/k.py", line 12
        /*0000*/                   LDC R1, c[0x0][0x28] ;
	//## File "/work/t/k.py", line 16
        /*0010*/              @!P0 LDG.E.128 R4, desc[UR6][R2.64] ;
.L_x_4:
	//## File "{LIB}", line 191 inlined at "/work/t/k.py", line 19
        /*0680*/                   SHFL.BFLY PT, R3, R0, 0x10, 0x1f ;
	//## File "{LIB}", line 170
        /*0690*/                   FMNMX R0, R9, R0, !PT ;
'''


def test_sass_line_comments():
    mod = parse_sass(SASS)
    assert [ln.text.split()[0] for ln in mod.lines] == ["LDC", "@!P0", "SHFL.BFLY", "FMNMX"]
    assert [ln.src_line for ln in mod.lines] == [12, 16, 19, 170]
    assert mod.lines[2].src_file == "/work/t/k.py" and mod.lines[3].src_file == LIB


PASSES = '''// -----// IR Dump Before TritonGPUCoalesce (tritongpu-coalesce) ('builtin.module' operation) //----- //
#blocked = #ttg.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
module {
}

// -----// IR Dump Before TritonGPUPipeline (tritongpu-pipeline) ('builtin.module' operation) //----- //
module {
  %0 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %z) -> (i32) : i32 {
  }
}
// -----// SoftwarePipeliner internal IR Dump After: LowerLoops
module {
}
// -----// IR Dump Before Canonicalizer (canonicalize) ('builtin.module' operation) //----- //
module {
}
'''


def test_split_passes_with_internal_dumps():
    ps = split_passes(PASSES)
    assert [(p.name, p.arg) for p in ps] == [("TritonGPUCoalesce", "tritongpu-coalesce"),
                                           ("TritonGPUPipeline", "tritongpu-pipeline"),
                                           ("SoftwarePipeliner.LowerLoops", ""), ("Canonicalizer", "canonicalize")]
    assert ps[0].text.startswith("#blocked = ") and "scf.for" in ps[1].text
    assert [p.index for p in ps] == [0, 1, 2, 3]
    assert split_passes("no dumps here\n") == []


def test_parse_stage_dispatch_and_resources():
    assert parse_stage("ttgir", MLIR).stage == "ttgir"
    assert parse_stage("ptx", PTX).stage == "ptx"
    assert parse_stage("sass", SASS).stage == "sass"
    llir = parse_stage("llir", "define void @k() {\n  ret void\n}\n")
    assert [ln.text for ln in llir.lines][1] == "  ret void"
    m = RESOURCE_RE.search("REG:16 STACK:0 SHARED:0 LOCAL:8 CONSTANT[0]:560")
    assert m and m.group("reg") == "16" and m.group("local") == "8"


def _marker(stem, marker):
    lines = (KERNELS / f"{stem}.py").read_text().splitlines()
    return next(i + 1 for i, t in enumerate(lines) if t.rstrip().endswith(f"# {marker}"))


def test_mapping_on_compiled_kernel(captures):
    """TTGIR, PTX and SASS of a real capture map the x load to the source line that loads x."""
    k: KernelIR = captures["k_vadd"][0]
    line = _marker("k_vadd", "LOAD-X")
    ttgir_loads = [ln for ln in k.ir("ttgir").lines if "tt.load" in ln.text]
    assert ttgir_loads[0].src_line == line and ttgir_loads[0].src_file.endswith("k_vadd.py")
    ptx_lds = [ln for ln in k.ir("ptx").lines if "ld.global" in ln.text]
    assert ptx_lds and ptx_lds[0].src_line == line
    sass_ldg = [ln for ln in k.ir("sass").lines if "LDG" in ln.text]
    assert sass_ldg and {ln.src_line for ln in sass_ldg} & {line, line + 1}


def test_inlined_reduction_maps_to_user_line(captures):
    """tl.sum is inlined from triton/language/standard.py: its ops cite the kernel's tl.sum line."""
    k: KernelIR = captures["k_atomic"][0]
    src = (KERNELS / "k_atomic.py").read_text().splitlines()
    reduce_ops = [ln for ln in k.ir("ttgir").lines if "tt.reduce.return" in ln.text]
    assert reduce_ops and all("tl.sum" in src[ln.src_line - 1] for ln in reduce_ops)
    ptx_lines = {ln.src_line for ln in k.ir("ptx").lines if "shfl.sync" in ln.text}
    assert ptx_lines and all(n is not None and "tl.sum" in src[n - 1] for n in ptx_lines)
