"""Detector catalog for NVIDIA targets: each reads one IR stage (or the pass dumps) of one launch.

A detector has an id, the tier it belongs to (``ir`` reads the final IR stages and resources;
``compiler`` reads the per-pass dumps), the stages it needs, and the rewrite families it suggests.
It returns findings that quote the IR line and the source line it maps to.
"""

from __future__ import annotations

import re
from pathlib import Path
from collections import Counter
from dataclasses import dataclass
from typing import Callable

from tritondx.tools.evidence import Finding, Severity, Tier, finding_id
from tritondx.tools.ir.context import KernelIR
from tritondx.tools.ir.parse import IRLine


@dataclass(frozen=True)
class Detector:
    id: str
    tier: Tier
    stages: tuple[str, ...]
    suggests: tuple[str, ...]
    description: str
    fn: Callable[["Detector", KernelIR], list[Finding]]

    def run(self, k: KernelIR) -> list[Finding]:
        if any(s not in k.texts for s in self.stages):
            return []
        return self.fn(self, k)

    def finding(self, k: KernelIR, message: str, line: IRLine | None = None, stage: str | None = None,
                severity: Severity = "medium", **metric) -> Finding:
        src_line = line.src_line if line else None
        if line and line.src_file and k.source_path and Path(line.src_file).name != Path(k.source_path).name:
            src_line = None  # the IR line maps into Triton's own library code, not the task
        return Finding(
            id=finding_id(self.id, k.name, src_line),
            detector=self.id, tier=self.tier, stage=stage or (self.stages[0] if self.stages else "ir"),
            kernel=k.name, severity=severity, message=message, source_line=src_line,
            source_text=k.source_text(src_line), ir_line=line.text[:300] if line else None,
            metric=metric, suggests=list(self.suggests),
        )


REGISTRY: dict[str, Detector] = {}


def detector(id: str, tier: Tier, stages: tuple[str, ...], suggests: tuple[str, ...], description: str):
    def wrap(fn):
        REGISTRY[id] = Detector(id, tier, stages, suggests, description, fn)
        return fn
    return wrap


def run_detectors(kernels: list[KernelIR], tier: Tier) -> list[Finding]:
    out: list[Finding] = []
    seen: set[str] = set()
    for k in kernels:
        for det in REGISTRY.values():
            if det.tier != tier:
                continue
            for f in det.run(k):
                if f.id not in seen:
                    seen.add(f.id)
                    out.append(f)
    return out


# ---------------------------------------------------------------------------------------------
# IR tier: final TTGIR / PTX / SASS and resources
# ---------------------------------------------------------------------------------------------

# Global memory access in PTX, with optional vector width and element size:
#   @%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
#   @%p2 st.global.b32 [ %rd5 + 0 ], { %r9 };
PTX_GLOBAL_ACCESS_RE = re.compile(r"\b(?P<op>ld|st)\.global(?:\.[a-z]+)*?(?:\.v(?P<vec>\d))?\.(?P<ty>[bfsu])(?P<bits>\d+)\b")


@detector("non_vectorized_global_access", "ir", ("ptx",), ("alignment_hints", "launch_config"),
          "global loads/stores narrower than 16 bytes per thread")
def _vector_width(det: Detector, k: KernelIR) -> list[Finding]:
    ptx = k.ir("ptx")
    narrow: list[tuple[IRLine, int]] = []
    total = 0
    for ln in ptx.lines:
        m = PTX_GLOBAL_ACCESS_RE.search(ln.text)
        if not m:
            continue
        total += 1
        width = int(m.group("vec") or 1) * int(m.group("bits")) // 8
        if width < 16:
            narrow.append((ln, width))
    if not total or not narrow:
        return []
    by_line = Counter(ln.src_line for ln, _ in narrow)
    worst_line = by_line.most_common(1)[0][0]
    ln, width = next((x for x in narrow if x[0].src_line == worst_line))
    frac = len(narrow) / total
    if frac < 0.5:
        return []
    return [det.finding(k, f"{len(narrow)}/{total} global accesses are {width} bytes wide per thread (16 possible): "
                           "the compiler could not prove contiguity/alignment, or the block gives each thread too "
                           "few elements", ln, severity="high" if frac > 0.8 else "medium",
                        narrow_accesses=len(narrow), total_accesses=total, width_bytes=width)]


# MMA instructions in PTX:
#   wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 ...
#   mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 { %r121, ... }
PTX_WGMMA_RE = re.compile(r"\bwgmma\.mma_async\S*")
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
          "matrix product not lowered to tensor cores (or a multiply-and-sum product in the source)")
def _dot_not_tc(det: Detector, k: KernelIR) -> list[Finding]:
    ttgir, ptx = k.ir("ttgir"), k.ir("ptx")
    dots = ttgir.find(TTGIR_DOT_RE) + ttgir.find(TTGIR_WGMMA_RE)
    tc = ptx.find(PTX_WGMMA_RE) + ptx.find(PTX_MMA_SYNC_RE)
    findings = []
    if dots and not tc:
        findings.append(det.finding(k, "tt.dot is present but the PTX has no mma/wgmma: the product runs on "
                                       "CUDA cores (FMA)", dots[0], stage="ttgir", severity="high"))
    src_lines = [i + 1 for i, t in enumerate(k.source.splitlines()) if SRC_MUL_SUM_RE.search(t)]
    for line in src_lines:
        via = "the compiler rescued it into " + ("mma.sync" if ptx.find(PTX_MMA_SYNC_RE) else "wgmma") if tc \
            else "it runs on CUDA cores"
        ln = IRLine(index=-1, text=(dots[0].text if dots else ""), src_line=line)
        findings.append(det.finding(k, f"matrix product written as multiply-and-sum (broadcast then tl.sum); {via}; "
                                       "tl.dot on the native operand dtype states it directly", ln, stage="source",
                                    severity="high", mul_sum_line=line))
    return findings


@detector("mma_v2_not_wgmma", "ir", ("ttgir", "ptx"), ("tl_dot", "launch_config"),
          "on sm_90 the dot uses mma.sync (Ampere MMA v2) instead of Hopper wgmma")
def _mma_v2(det: Detector, k: KernelIR) -> list[Finding]:
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
          "16-bit operands upcast to f32 before the dot: tf32 or FMA at a fraction of the 16-bit MMA rate")
def _fp32_dot(det: Detector, k: KernelIR) -> list[Finding]:
    hits = k.ir("ttgir").find(TTGIR_EXTF_DOT_RE)
    if not hits:
        return []
    return [det.finding(k, "dot operands are 16-bit values upcast to f32 (arith.extf) before the dot: the MMA runs in "
                           "tf32 at half the fp16/bf16 rate and moves twice the bytes through registers", hits[0],
                        severity="high", upcasts=len(hits))]


@detector("register_spills", "ir", ("ptx",), ("launch_config",),
          "ptxas spilled registers to local memory")
def _spills(det: Detector, k: KernelIR) -> list[Finding]:
    r = k.resources
    spill = r.get("spill_store_bytes", 0) + r.get("spill_load_bytes", 0)
    if not spill:
        return []
    return [det.finding(k, f"ptxas spills {r.get('spill_store_bytes', 0)} B stores / {r.get('spill_load_bytes', 0)} B "
                           f"loads with {r.get('registers')} registers per thread", None, severity="high", **r)]


def occupancy(k: KernelIR) -> dict[str, float]:
    """Resident warps per SM from registers, shared memory and warps per program (sm_90 limits)."""
    lim = k.limits
    threads = k.num_warps * 32
    regs = max(k.resources.get("registers", 32), 1)
    regs_per_block = regs * threads
    by_regs = lim["regs_per_sm"] // max(regs_per_block, 1)
    smem = k.resources.get("shared_bytes", 0)
    by_smem = lim["smem_per_sm"] // smem if smem else lim["max_blocks_per_sm"]
    by_threads = lim["max_threads_per_sm"] // threads
    blocks = max(0, min(by_regs, by_smem, by_threads, lim["max_blocks_per_sm"]))
    limiter = min((("registers", by_regs), ("shared memory", by_smem), ("threads", by_threads),
                   ("blocks per SM", lim["max_blocks_per_sm"])), key=lambda x: x[1])[0]
    return {"blocks_per_sm": blocks, "warps_per_sm": blocks * k.num_warps,
            "occupancy": blocks * threads / lim["max_threads_per_sm"], "limiter": limiter}


@detector("low_occupancy", "ir", ("ptx",), ("launch_config",),
          "few warps resident per SM (from registers, shared memory and warps per program)")
def _low_occ(det: Detector, k: KernelIR) -> list[Finding]:
    occ = occupancy(k)
    if occ["occupancy"] >= 0.25 or k.programs < k.limits["sm_count"]:
        return []
    return [det.finding(k, f"estimated occupancy {occ['occupancy']:.0%} ({occ['blocks_per_sm']} programs x "
                           f"{k.num_warps} warps per SM), limited by {occ['limiter']}", None, severity="medium",
                        **{kk: v for kk, v in occ.items()})]


@detector("grid_too_small", "ir", ("ttgir",), ("split_k", "persistent", "launch_config"),
          "fewer programs than SMs: part of the chip idles")
def _grid_small(det: Detector, k: KernelIR) -> list[Finding]:
    sms = k.limits["sm_count"]
    if k.programs >= sms:
        return []
    return [det.finding(k, f"grid has {k.programs} programs for {sms} SMs: {1 - k.programs / sms:.0%} of the SMs idle",
                        None, severity="high" if k.programs < sms / 2 else "medium", programs=k.programs, sms=sms)]


@detector("tail_effect", "ir", ("ttgir",), ("persistent", "launch_config"),
          "the last wave of programs leaves most SMs idle")
def _tail(det: Detector, k: KernelIR) -> list[Finding]:
    occ = occupancy(k)
    per_wave = max(1, int(occ["blocks_per_sm"]) * k.limits["sm_count"])
    waves = k.programs / per_wave
    if waves < 1 or waves > 8:
        return []
    last = waves - int(waves)
    if last == 0 or last > 0.5:
        return []
    return [det.finding(k, f"{waves:.2f} waves of {per_wave} programs: the last wave is {last:.0%} full",
                        None, severity="low", waves=round(waves, 3), programs=k.programs, per_wave=per_wave)]


# Tensor type of a block value in TTGIR:  tensor<128xf32, #blocked>  or  tensor<64x64xf16, #mma>
TENSOR_SHAPE_RE = re.compile(r"tensor<((?:\d+x)*\d+)x(?:!tt\.ptr<)?[a-z]+\d*")


@detector("tiny_programs", "ir", ("ttgir",), ("launch_config",),
          "each program handles very little data: launch and scheduling overhead dominate")
def _tiny(det: Detector, k: KernelIR) -> list[Finding]:
    largest = 0
    for ln in k.ir("ttgir").lines:
        for m in TENSOR_SHAPE_RE.finditer(ln.text):
            n = 1
            for d in m.group(1).split("x"):
                n *= int(d)
            largest = max(largest, n)
    per_thread = largest / (k.num_warps * 32)
    if largest == 0 or largest >= 1024 or k.programs < 4 * k.limits["sm_count"]:
        return []
    return [det.finding(k, f"largest block tensor has {largest} elements ({per_thread:g} per thread) across "
                           f"{k.programs} programs", None, severity="high" if largest <= 256 else "medium",
                        block_elements=largest, programs=k.programs, num_warps=k.num_warps)]


# 64-bit index arithmetic in a loop body:
#   %offs_64 = arith.extsi %offs : tensor<1024xi32, #blocked> to tensor<1024xi64, #blocked>
#   %9 = arith.muli %8, %c4096_i64 : i64
TTGIR_I64_ARITH_RE = re.compile(r"arith\.(?:muli|addi|extsi)\b.*\bi64\b")


@detector("int64_index_arithmetic", "ir", ("ttgir",), ("index_width",),
          "64-bit integer index arithmetic where 32 bits would do")
def _i64(det: Detector, k: KernelIR) -> list[Finding]:
    hits = [ln for ln in k.ir("ttgir").find(TTGIR_I64_ARITH_RE) if "tensor<" in ln.text]
    if not hits:
        return []
    return [det.finding(k, f"{len(hits)} tensor-wide 64-bit index ops (twice the integer work and registers of i32)",
                        hits[0], severity="low", ops=len(hits))]


# Atomic read-modify-write in TTGIR:  %5 = tt.atomic_rmw fadd, acq_rel, gpu, %ptr, %val, %mask : ...
TTGIR_ATOMIC_RE = re.compile(r"\btt\.atomic_(rmw|cas)\b")


@detector("atomics_in_hot_path", "ir", ("ttgir",), ("split_k", "fuse_passes"),
          "atomic read-modify-write operations on global memory")
def _atomics(det: Detector, k: KernelIR) -> list[Finding]:
    hits = k.ir("ttgir").find(TTGIR_ATOMIC_RE)
    if not hits:
        return []
    return [det.finding(k, f"{len(hits)} atomic RMW op(s); contended atomics serialize in L2", hits[0],
                        severity="medium", atomics=len(hits))]


# Layout conversion left in the final TTGIR:
#   %12 = ttg.convert_layout %11 : tensor<128xf32, #blocked> -> tensor<128xf32, #blocked1>
TTGIR_CVT_RE = re.compile(r"\bttg\.convert_layout\b")


@detector("excessive_layout_conversions", "ir", ("ttgir",), ("launch_config",),
          "layout conversions (shared-memory round trips) survive in the final TTGIR")
def _cvt(det: Detector, k: KernelIR) -> list[Finding]:
    hits = k.ir("ttgir").find(TTGIR_CVT_RE)
    if len(hits) < 3:
        return []
    return [det.finding(k, f"{len(hits)} ttg.convert_layout ops remain after RemoveLayoutConversions", hits[0],
                        severity="medium", conversions=len(hits))]


# Masked load in a loop body (TTGIR):  %x = tt.load %ptr, %mask, %other : tensor<256x!tt.ptr<f32>, #blocked>
TTGIR_MASKED_LOAD_RE = re.compile(r"\btt\.load %\S+, %\S+")
# Loop header:  %acc = scf.for %i = %c0_i32 to %N step %c256_i32 iter_args(...) -> (...)
SCF_FOR_RE = re.compile(r"\bscf\.for\b")


@detector("masked_loads_in_loop", "ir", ("ttgir",), ("mask_removal",),
          "loads inside a loop carry a mask on every iteration")
def _masked_loop(det: Detector, k: KernelIR) -> list[Finding]:
    ir = k.ir("ttgir")
    depth, hits = 0, []
    for ln in ir.lines:
        if SCF_FOR_RE.search(ln.text):
            depth += 1
        elif ln.text.startswith("}") and depth:
            depth -= 1
        elif depth and TTGIR_MASKED_LOAD_RE.search(ln.text):
            hits.append(ln)
    if not hits:
        return []
    return [det.finding(k, f"{len(hits)} masked load(s) inside a loop: the bound check runs every iteration "
                           "even where the shape divides the block", hits[0], severity="low", masked_loads=len(hits))]


# ---------------------------------------------------------------------------------------------
# Compiler tier: per-pass dumps (MLIR_ENABLE_DUMP)
# ---------------------------------------------------------------------------------------------

def _after(k: KernelIR, pass_name: str) -> str | None:
    """IR right after a pass = the IR dumped before the next pass."""
    ps = k.passes
    for i, p in enumerate(ps):
        if p.name == pass_name and i + 1 < len(ps):
            return ps[i + 1].text
    return None


def _before(k: KernelIR, pass_name: str) -> str | None:
    return next((p.text for p in k.passes if p.name == pass_name), None)


# Blocked layout definition:
#   #blocked = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]}>
BLOCKED_LAYOUT_RE = re.compile(r"^(#blocked\d*) = #ttg\.blocked<\{sizePerThread = \[(?P<spt>[\d, ]+)\].*?order = \[(?P<order>[\d, ]+)\]", re.M)
# Contiguity the axis analysis found for a pointer, printed on async copies:  {contiguity = 2 : i32}
CONTIGUITY_RE = re.compile(r"contiguity = (\d+)")


@detector("coalesce_layout", "compiler", ("passes",), ("alignment_hints", "launch_config"),
          "the coalescing pass gave each thread a small contiguous chunk")
def _coalesce(det: Detector, k: KernelIR) -> list[Finding]:
    after = _after(k, "TritonGPUCoalesce")
    if after is None:
        return []
    layouts = {m.group(1): (m.group("spt"), m.group("order")) for m in BLOCKED_LAYOUT_RE.finditer(after)}
    # only the layouts that global loads/stores use after coalescing
    used = []
    for ln in after.splitlines():
        if re.search(r"\btt\.(load|store)\b", ln):
            used += [m.group(0) for m in re.finditer(r"#blocked\d*\b", ln) if m.group(0) in layouts]
    out = []
    for name in dict.fromkeys(used):
        spt, order = layouts[name]
        per_thread = 1
        for d in spt.split(","):
            per_thread *= int(d)
        if per_thread == 1:
            line = next((IRLine(-1, ln.strip()) for ln in after.splitlines() if ln.startswith(name + " =")), None)
            out.append(det.finding(k, f"TritonGPUCoalesce chose {name} with sizePerThread=[{spt}] order=[{order}] for "
                                      "global accesses: one element per thread per access (no vector access)", line,
                                   stage="passes", severity="medium", size_per_thread=spt, order=order))
    return out[:1]


@detector("accelerate_matmul_result", "compiler", ("passes",), ("tl_dot", "launch_config"),
          "what TritonGPUAccelerateMatmul did with each dot")
def _accel(det: Detector, k: KernelIR) -> list[Finding]:
    before = _before(k, "TritonGPUAccelerateMatmul")
    after = _after(k, "TritonGPUAccelerateMatmul")
    if before is None or after is None or "tt.dot" not in before:
        return []
    if "warp_group_dot" in after or "nvidia_mma<{versionMajor = 3" in after:
        return []  # wgmma: nothing to fix here
    m = re.search(r"nvidia_mma<\{versionMajor = (\d+)", after)
    version = m.group(1) if m else None
    dot_line = next((ln.strip() for ln in after.splitlines() if "tt.dot" in ln), "")
    what = f"MMA v{version}" if version else "no MMA layout (FMA dot)"
    return [det.finding(k, f"AccelerateMatmul produced {what} instead of Hopper wgmma (v3)",
                        IRLine(-1, dot_line), stage="passes", severity="high", mma_version=version or "none")]


# Async copies and TMA in TTGIR after the pipeliner:
#   ttg.async_copy_global_to_local ...      ttng.async_tma_copy_global_to_local ...
ASYNC_COPY_RE = re.compile(r"\bttg\.async_copy_global_to_local\b|\bttng\.async_tma_copy_global_to_local\b")


@detector("unpipelined_loop", "compiler", ("passes",), ("pipelining", "launch_config"),
          "the software pipeliner left a loop with global loads unpipelined")
def _pipeline(det: Detector, k: KernelIR) -> list[Finding]:
    before = _before(k, "TritonGPUPipeline")
    after = _after(k, "TritonGPUPipeline")
    if before is None or after is None or "scf.for" not in before:
        return []
    loads_in_loops = bool(re.search(r"scf\.for[\s\S]*?tt\.load", before))
    if not loads_in_loops:
        return []
    if ASYNC_COPY_RE.search(after) or "tt.descriptor_load" in after and "async" in after:
        return []
    reason = f"num_stages={k.num_stages}" if k.num_stages <= 1 else "loads feed no dot (only dot operands are " \
                                                                    "pipelined by default) or depend on the loop"
    line = next((ln.strip() for ln in before.splitlines() if "scf.for" in ln), "")
    return [det.finding(k, f"TritonGPUPipeline did not pipeline the loop ({reason}): each iteration waits on its "
                           "global loads", IRLine(-1, line), stage="passes", severity="medium",
                        num_stages=k.num_stages)]


@detector("layout_conversions_survived", "compiler", ("passes",), ("launch_config",),
          "layout conversions RemoveLayoutConversions could not remove")
def _cvt_passes(det: Detector, k: KernelIR) -> list[Finding]:
    ps = k.passes
    idx = [i for i, p in enumerate(ps) if p.name == "TritonGPURemoveLayoutConversions"]
    if not idx or idx[-1] + 1 >= len(ps):
        return []
    before = ps[idx[0]].text.count("ttg.convert_layout")
    after = ps[idx[-1] + 1].text.count("ttg.convert_layout")
    if after < 2:
        return []
    return [det.finding(k, f"{after} convert_layout ops survive RemoveLayoutConversions (had {before} before its "
                           "first run)", None, stage="passes", severity="low", before=before, after=after)]
