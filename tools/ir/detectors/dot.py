"""CUDA detectors of the tensor-core path: a dot that misses the tensor cores, mma.sync where wgmma would do,
f32 operands of a dot and f32 dots without tf32."""

from __future__ import annotations

import re

from tritondx.tools.ir.context import KernelIR
from tritondx.tools.ir.detectors.common import func_of, kernel_source_lines, task_tolerance
from tritondx.tools.ir.parse import IRLine
from tritondx.tools.ir.registry import Detector, detector
from tritondx.tools.records.evidence import Finding


# MMA instructions in PTX:
#   wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 ...
#   mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 { %r121, ... }
PTX_WGMMA_RE = re.compile(r"\bwgmma\.mma_async\S*")


#   mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 { %r1, %r2, %r3, %r4 }, { %r5, %r6, %r7, %r8 }, ...
PTX_MMA_SYNC_RE = re.compile(r"\bmma\.sync\.aligned\.(?P<shape>m\d+n\d+k\d+)\S*?\.(?P<types>[a-z0-9.]+)")


# tt.dot in TTGIR with its precision and operand type:
#   %acc_106 = tt.dot %a, %b, %acc, inputPrecision = tf32 : tensor<32x8xf32, ...> * ... -> tensor<32x32xf32, #mma>
TTGIR_DOT_RE = re.compile(r"\btt\.dot\b.*?(?:inputPrecision = (?P<prec>\w+))?\s*:\s*tensor<(?P<m>\d+)x(?P<k>\d+)x(?P<ty>\w+)")


# Hopper warp-group MMA in TTGIR:
#   %0 = ttng.warp_group_dot %a, %b, %acc {inputPrecision = 0 : i32, isAsync = true} : ...
TTGIR_WGMMA_RE = re.compile(r"\bttng\.warp_group_dot\b")


# Reduction of a broadcast product written in the source (multiply-and-sum):
#   acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)
SRC_MUL_SUM_RE = re.compile(r"tl\.sum\(.*\[:,\s*:,\s*None\].*\*.*\[None,\s*:,\s*:\]")


@detector("dot_not_tensor_core", "ir", ("ttgir", "ptx"), ("tl_dot",),
          "matrix product not lowered to tensor cores (or a multiply-and-sum product in the source)", targets=("cuda",))
def _dot_not_tc(det: Detector, k: KernelIR) -> list[Finding]:
    """Two signals. IR: a `tt.dot`/`ttng.warp_group_dot` in TTGIR while the PTX has neither `wgmma.mma_async`
    nor `mma.sync` (the dot became FMA). Source: a `tl.sum(a[:, :, None] * b[None, :, :], axis=1)` product
    written inside this kernel's own `def` (reported even when the compiler rescued it into an MMA)."""
    ttgir, ptx = k.ir("ttgir"), k.ir("ptx")
    dots = ttgir.find(TTGIR_DOT_RE) + ttgir.find(TTGIR_WGMMA_RE)
    tc = ptx.find(PTX_WGMMA_RE) + ptx.find(PTX_MMA_SYNC_RE)
    findings = []
    if dots and not tc:
        findings.append(det.finding(k, "tt.dot is present but the PTX has no mma/wgmma: the product runs on "
                                       "CUDA cores (FMA)", dots[0], stage="ttgir", severity="high"))
    span = kernel_source_lines(k)
    src_lines = [i + 1 for i, t in enumerate(k.source.splitlines()) if SRC_MUL_SUM_RE.search(t)
                 and (span is None or span[0] <= i + 1 <= span[1])]  # only this kernel's own lines
    for line in src_lines:
        via = "the compiler rescued it into " + ("mma.sync" if ptx.find(PTX_MMA_SYNC_RE) else "wgmma") if tc \
            else "it runs on CUDA cores"
        ln = IRLine(index=-1, text=(dots[0].text if dots else ""), src_line=line)
        findings.append(det.finding(k, f"matrix product written as multiply-and-sum (broadcast then tl.sum); {via}; "
                                       "tl.dot on the native operand dtype states it directly", ln, stage="source",
                                    severity="high", mul_sum_line=line))
    return findings


@detector("mma_v2_not_wgmma", "ir", ("ttgir", "ptx"), ("tl_dot", "launch_config"),
          "on sm_90 the dot uses mma.sync (Ampere MMA v2) instead of Hopper wgmma", targets=("cuda",))
def _mma_v2(det: Detector, k: KernelIR) -> list[Finding]:
    """On sm_90 the PTX has `mma.sync` but no `wgmma`. The reasons listed come from the TTGIR dot (M tile below
    64 rows, f32 operands) and the launch (num_warps not a multiple of 4)."""
    if k.arch < 90:
        return []
    ptx = k.ir("ptx")
    mma = ptx.find(PTX_MMA_SYNC_RE)
    if not mma or ptx.find(PTX_WGMMA_RE):
        return []
    m = PTX_MMA_SYNC_RE.search(mma[0].text)
    dot = k.ir("ttgir").find(TTGIR_DOT_RE)
    tile = ""
    reasons = []
    if dot:
        d = TTGIR_DOT_RE.search(dot[0].text)
        tile = f" on a {d.group('m')}x{d.group('k')} {d.group('ty')} operand tile"
        if int(d.group("m")) < 64:
            reasons.append("M tile < 64 (a warpgroup MMA needs 64 rows)")
        if d.group("ty") == "f32":
            reasons.append("f32 operands (upcast before the dot)")
    if k.num_warps % 4:
        reasons.append(f"num_warps={k.num_warps} is not a multiple of 4")
    return [det.finding(k, f"dot lowered to mma.sync {m.group('shape')} ({m.group('types')}){tile}, not wgmma"
                           + (f": {'; '.join(reasons)}" if reasons else ""), mma[0], stage="ptx",
                        severity="high", mma_shape=m.group("shape"), reasons="; ".join(reasons))]


# Dot operand converted up from a narrower float just before the dot:
#   %acc_104 = arith.extf %acc_101 : tensor<32x8xf16, #ttg.dot_op<...>> to tensor<32x8xf32, #ttg.dot_op<...>>
TTGIR_EXTF_DOT_RE = re.compile(r"arith\.extf .*tensor<[^>]*x(f16|bf16),\s*#ttg\.dot_op.* to tensor<[^>]*xf32")


@detector("fp32_dot_operands", "ir", ("ttgir",), ("tl_dot",),
          "16-bit operands upcast to f32 before the dot: tf32 or FMA at a fraction of the 16-bit MMA rate", targets=("cuda",))
def _fp32_dot(det: Detector, k: KernelIR) -> list[Finding]:
    """TTGIR `arith.extf` from f16/bf16 to f32 on a `#ttg.dot_op` operand: 16-bit data upcast right before the
    dot, so the MMA runs as tf32 (or FMA) instead of at the 16-bit rate."""
    hits = k.ir("ttgir").find(TTGIR_EXTF_DOT_RE)
    if not hits:
        return []
    return [det.finding(k, "dot operands are 16-bit values upcast to f32 (arith.extf) before the dot: the MMA runs in "
                           "tf32 at half the fp16/bf16 rate and moves twice the bytes through registers", hits[0],
                        severity="high", upcasts=len(hits))]


# Input precision of a dot in TTIR (absent = ieee, the printer omits the default):
#   %acc_26 = tt.dot %a_16, %b_25, %acc_5, inputPrecision = tf32 : tensor<64x32xf32> * tensor<32x64xf32> -> tensor<64x64xf32>
TTIR_DOT_PRECISION_RE = re.compile(r"inputPrecision = (?P<prec>\w+)")


@detector("fp32_dot_without_tf32", "ir", ("ttir",), ("tl_dot",),
          "fp32 tl.dot computed in full precision (inputPrecision = ieee: FMA on CUDA cores) although the task's "
          "tolerance admits tf32 tensor cores", targets=("cuda",))
def _fp32_ieee(det: Detector, k: KernelIR) -> list[Finding]:
    """A TTIR `tt.dot` on f32 operands whose `inputPrecision` is ieee (the printer omits the default, so no
    attribute means ieee) or tf32x3. Fires only when the task's TOLERANCE for float32 has rtol >= 1e-3
    (tf32 keeps a 10-bit mantissa, ~1e-3 relative error per product), or at low severity when the task
    states no float32 tolerance; a tighter tolerance keeps ieee as the right choice."""
    f = func_of(k, "ttir")
    if f is None:
        return []
    tol = task_tolerance(k.source).get("float32")
    out = []
    for op in f.ops:
        if op.name != "tt.dot":
            continue
        types = op.operand_types
        if len(types) < 2 or types[0].elem != "f32" or types[1].elem != "f32":
            continue
        m = TTIR_DOT_PRECISION_RE.search(op.body)
        prec = m.group("prec") if m else "ieee"
        if prec not in ("ieee", "tf32x3"):
            continue
        allowed = tol is None or tol.get("rtol", 0.0) >= 1e-3
        if not allowed:
            continue  # the tolerance needs full fp32: ieee is the right choice
        tol_note = (f"TOLERANCE for float32 is rtol={tol['rtol']:g}, atol={tol.get('atol', 0):g}, which admits tf32 "
                    "(10-bit mantissa, ~1e-3 relative)") if tol else "the task states no float32 tolerance: check it"
        cost = "runs on CUDA-core FMA, about 1/7 of the tf32 tensor-core rate on H100" if prec == "ieee" \
            else "issues 3 tf32 MMAs per product"
        out.append(det.finding(k, f"fp32 tl.dot with inputPrecision = {prec} {cost}; {tol_note}: "
                                  "input_precision=\"tf32\" (or 16-bit operands) would use the tensor cores", op.line,
                               stage="ttir", severity="high" if tol else "low", input_precision=prec,
                               rtol=tol.get("rtol", -1.0) if tol else -1.0))
    return out[:1]
