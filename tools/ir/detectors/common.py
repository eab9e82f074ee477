"""Helpers the CUDA detectors share: the kernel's def-use function per stage, the kernel's source lines and
tolerance, the PTX access widths by source line, and the memory ops and fast dimensions of a layout."""

from __future__ import annotations

import ast
import re

from tritondx.tools.ir.context import KernelIR
from tritondx.tools.ir.layouts import Layout
from tritondx.tools.ir.ssa import Func, kernel_func


def func_of(k: KernelIR, stage: str = "ttgir") -> Func | None:
    """The kernel's function in one MLIR stage, built once per kernel."""
    cache = k.__dict__.setdefault("_tdx_funcs", {})
    if stage not in cache:
        mod = k.ir(stage)
        cache[stage] = kernel_func(k.texts[stage], mod, k.name) if mod is not None else None
    return cache[stage]


def kernel_source_lines(k: KernelIR) -> tuple[int, int] | None:
    """First and last source line of the kernel's ``def`` (the task file may hold several kernels)."""
    try:
        tree = ast.parse(k.source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == k.name:
            return node.lineno, node.end_lineno or node.lineno
    return None


def task_tolerance(source: str) -> dict[str, dict[str, float]]:
    """TOLERANCE of the task as {"float32": {"atol": .., "rtol": ..}} (dtype keys normalized)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "TOLERANCE" for t in node.targets):
            out = {}
            if not isinstance(node.value, ast.Dict):
                return {}
            for key, val in zip(node.value.keys, node.value.values):
                name = ast.unparse(key).replace("torch.", "").strip("'\"") if key is not None else ""
                try:
                    out[name] = {str(kk): float(vv) for kk, vv in ast.literal_eval(val).items()}
                except (ValueError, TypeError, SyntaxError):
                    continue
            return out
    return {}


# Global memory access in PTX, with optional cache qualifiers, vector width and element size:
#   @%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
#   @%p2 st.global.b32 [ %rd5 + 0 ], { %r9 };
#   ld.global.nc.L1::evict_last.v2.f32 { %f1, %f2 }, [ %rd3 + 0 ];
PTX_GLOBAL_ACCESS_RE = re.compile(r"\b(?P<op>ld|st)\.global(?:\.(?!v\d\.)[\w:]+)*?(?:\.v(?P<vec>\d))?"
                                  r"\.(?P<ty>[bfsu])(?P<bits>\d+)\b")


# Loop header:  %acc = scf.for %i = %c0_i32 to %N step %c256_i32 iter_args(...) -> (...)
SCF_FOR_RE = re.compile(r"\bscf\.for\b")


# Contiguity the axis analysis found for a pointer, printed on async copies:  {contiguity = 2 : i32}
CONTIGUITY_RE = re.compile(r"contiguity = (\d+)")


# cp.async in PTX with its copy size in bytes:
#   cp.async.ca.shared.global [ %r103 + 0 ], [ %rd29 + 0 ], 0x8, %r104;
PTX_CP_ASYNC_RE = re.compile(r"\bcp\.async\.(?:ca|cg)\.shared\.global\S*\s+\[[^\]]*\],\s*\[[^\]]*\],\s*(?P<size>0x[0-9a-fA-F]+|\d+)")


# TMA bulk tensor copy in PTX:
#   @%p2 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r13], [%rd2, {%r165, %r14}], [%r10];
PTX_TMA_RE = re.compile(r"\bcp\.async\.bulk\.tensor\b")


def ptx_access_widths(k: KernelIR) -> dict[int | None, list[int]]:
    """Bytes per thread of every global access (ld/st.global, cp.async) in the PTX, by source line."""
    out: dict[int | None, list[int]] = {}
    ptx = k.ir("ptx")
    if ptx is None:
        return out
    for ln in ptx.lines:
        m = PTX_GLOBAL_ACCESS_RE.search(ln.text)
        if m:
            out.setdefault(ln.src_line, []).append(int(m.group("vec") or 1) * int(m.group("bits")) // 8)
            continue
        m = PTX_CP_ASYNC_RE.search(ln.text)
        if m:
            out.setdefault(ln.src_line, []).append(int(m.group("size"), 0))
    return out


def memory_ops(f: Func) -> list:
    return f.loads() + [op for op in f.stores() if op.name == "tt.store"]


def fast_dims(lay: Layout, shape: tuple[int, ...]) -> tuple[int | None, int | None]:
    """(order[0], the first dim in order along which lanes of a warp vary)."""
    order = lay.order
    if not order or len(order) != len(shape):
        return None, None
    tpw = lay.ints("threadsPerWarp")
    lane = next((d for d in order if d < len(tpw) and tpw[d] > 1 and shape[d] > 1), order[0])
    return order[0], lane


# Shared-memory read/write with its descriptor and register tensor:
#   %a_72 = ttg.local_load %a_71 token %a_70 : !ttg.memdesc<64x32xf32, #shared, #smem, mutable> -> tensor<64x32xf32, #ttg.dot_op<{opIdx = 0, parent = #blocked}>>
#   ttg.local_store %x, %buf : tensor<64x64xf32, #blocked> -> !ttg.memdesc<64x64xf32, #shared, #smem, mutable>
MEMDESC_RE = re.compile(r"memdesc<(?P<shape>(?:\d+x)+)(?P<elem>[a-z]+\d*),\s*(?P<enc>#[\w.]+(?:<\{[^}]*\}>)?)")


def elem_bytes_of(ty: str) -> int:
    m = re.search(r"(\d+)$", ty)
    return max(1, int(m.group(1)) // 8) if m else 4
