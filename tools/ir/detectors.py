"""Detector catalog for NVIDIA targets: each reads one IR stage (or the pass dumps) of one launch.

A detector has an id, the tier it belongs to (``ir`` reads the final IR stages and resources;
``compiler`` reads the per-pass dumps and the facts the compiler decided), the stages it needs, and
the rewrite families it suggests. It returns findings that quote the IR line and the source line it
maps to. Most detectors look at one launch; ``launch_overhead_dominating`` looks at every launch of
one ``launch()`` call (``scope="capture"``).

``catalog_table()`` lists the catalog for the docs (``python -m tritondx.tools.ir.catalog_doc``);
``pass_changes(k)`` is the per-pass change summary the ``pass_summary`` detector reports.
"""

from __future__ import annotations

import ast
import difflib
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tritondx.tools.records.evidence import Finding, Severity, Tier, finding_id
from tritondx.tools.ir.context import KernelIR
from tritondx.tools.ir.parse import IRLine
from tritondx.tools.ir.strides import strides
from tritondx.tools.ir.ssa import (
    Func,
    Layout,
    display,
    kernel_func,
    layout_of,
)

#: Rewrite families a detector may suggest (ids of the rewrite catalog).
REWRITE_FAMILIES = ("launch_config", "alignment_hints", "vectorize_scalar_loop", "tl_dot", "grouped_ordering",
                    "pipelining", "fuse_passes", "fuse_launches", "split_k", "persistent", "mask_removal",
                    "index_width", "tile_2d")


@dataclass(frozen=True)
class Detector:
    id: str
    tier: Tier
    stages: tuple[str, ...]
    suggests: tuple[str, ...]
    description: str
    fn: Callable[..., list[Finding]]
    scope: str = "launch"   # "launch": fn(det, k); "capture": fn(det, kernels) over every launch of one capture

    def run(self, k: KernelIR) -> list[Finding]:
        if any(s not in k.texts for s in self.stages):
            return []
        return self.fn(self, [k]) if self.scope == "capture" else self.fn(self, k)

    def run_capture(self, kernels: list[KernelIR]) -> list[Finding]:
        if self.scope != "capture":
            return [f for k in kernels for f in self.run(k)]
        ks = [k for k in kernels if all(s in k.texts for s in self.stages)]
        return self.fn(self, ks) if ks else []

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


def detector(id: str, tier: Tier, stages: tuple[str, ...], suggests: tuple[str, ...], description: str,
             scope: str = "launch"):
    unknown = set(suggests) - set(REWRITE_FAMILIES)
    if unknown:
        raise ValueError(f"detector {id}: unknown rewrite families {sorted(unknown)}")

    def wrap(fn):
        REGISTRY[id] = Detector(id, tier, stages, suggests, description, fn, scope)
        return fn
    return wrap


def run_detectors(kernels: list[KernelIR], tier: Tier) -> list[Finding]:
    out: list[Finding] = []
    seen: set[str] = set()

    def add(fs: list[Finding]):
        for f in fs:
            if f.id not in seen:
                seen.add(f.id)
                out.append(f)

    for k in kernels:
        for det in REGISTRY.values():
            if det.tier == tier and det.scope == "launch":
                add(det.run(k))
    for det in REGISTRY.values():
        if det.tier == tier and det.scope == "capture":
            add(det.run_capture(kernels))
    return out


def resource_report(k: KernelIR) -> Finding:
    """The launch's resource report (not a detector: it always applies): registers, spills, stack and shared
    memory from ptxas -v and the kernel metadata, warps and programs, and the occupancy estimate."""
    r, occ = k.resources, occupancy(k)
    msg = (f"{r.get('registers', '?')} registers/thread, {r.get('spill_store_bytes', 0) + r.get('spill_load_bytes', 0)} B "
           f"spilled, {r.get('stack_bytes', 0)} B stack, {r.get('shared_bytes', 0)} B shared/program; "
           f"{k.num_warps} warps x {k.programs} programs; estimated occupancy {occ['occupancy']:.0%} "
           f"({occ['blocks_per_sm']} programs/SM, limited by {occ['limiter']})")
    return Finding(id=finding_id("resource_report", k.name, None) + f":{k.record.get('index', 0)}",
                   detector="resource_report", tier="ir", stage="ptx", kernel=k.name, severity="info", message=msg,
                   metric={"programs": k.programs, "num_warps": k.num_warps, "num_stages": k.num_stages,
                           **{kk: v for kk, v in r.items()}, "occupancy": round(occ["occupancy"], 3),
                           "occupancy_limiter": occ["limiter"]})


def catalog_table() -> list[dict]:
    """One row per detector (for docs/detectors.md): id, tier, stages, suggests, description."""
    return [{"id": d.id, "tier": d.tier, "stages": list(d.stages), "suggests": list(d.suggests),
             "description": d.description} for d in REGISTRY.values()]


def _func(k: KernelIR, stage: str = "ttgir") -> Func | None:
    """The kernel's function in one MLIR stage, built once per kernel."""
    cache = k.__dict__.setdefault("_tdx_funcs", {})
    if stage not in cache:
        mod = k.ir(stage)
        cache[stage] = kernel_func(k.texts[stage], mod, k.name) if mod is not None else None
    return cache[stage]


def _kernel_source_lines(k: KernelIR) -> tuple[int, int] | None:
    """First and last source line of the kernel's ``def`` (the task file may hold several kernels)."""
    try:
        tree = ast.parse(k.source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == k.name:
            return node.lineno, node.end_lineno or node.lineno
    return None


def _task_tolerance(source: str) -> dict[str, dict[str, float]]:
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


# ---------------------------------------------------------------------------------------------
# IR tier: final TTGIR / PTX / SASS and resources
# ---------------------------------------------------------------------------------------------

# Global memory access in PTX, with optional cache qualifiers, vector width and element size:
#   @%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];
#   @%p2 st.global.b32 [ %rd5 + 0 ], { %r9 };
#   ld.global.nc.L1::evict_last.v2.f32 { %f1, %f2 }, [ %rd3 + 0 ];
PTX_GLOBAL_ACCESS_RE = re.compile(r"\b(?P<op>ld|st)\.global(?:\.(?!v\d\.)[\w:]+)*?(?:\.v(?P<vec>\d))?"
                                  r"\.(?P<ty>[bfsu])(?P<bits>\d+)\b")
# A load or store of one scalar value in TTGIR (its pointer is no tensor): one value per program, e.g. a row's
# scale or index; nothing can vectorize it.
#   %s_0 = tt.load %s : !tt.ptr<f32> loc(#loc21)
TTGIR_SCALAR_ACCESS_RE = re.compile(r"\btt\.(?:load|store)\b.*:\s*!tt\.ptr<[^<>]*>\s*(?:loc\(.*)?$")


def _access_width(m: re.Match) -> int:
    """Bytes one PTX global access moves per thread: its own vector count x element bits."""
    return int(m.group("vec") or 1) * int(m.group("bits")) // 8


def _access_name(m: re.Match) -> str:
    """'ld.global.v2.b32': the access without its cache qualifiers."""
    return f"{m.group('op')}.global{'.v' + m.group('vec') if m.group('vec') else ''}.{m.group('ty')}{m.group('bits')}"


@detector("non_vectorized_global_access", "ir", ("ptx",), ("alignment_hints", "launch_config"),
          "global loads/stores narrower than 16 bytes per thread")
def _vector_width(det: Detector, k: KernelIR) -> list[Finding]:
    """Counts PTX `ld.global`/`st.global` by their own width (vector count x element bits: `ld.global.v2.b32` moves
    8 bytes, `st.global.b32` 4). Accesses of one scalar value per program (a TTGIR `tt.load`/`tt.store` on a plain
    `!tt.ptr`, mapped to the same source line) are left out: nothing can vectorize them. Fires when at least half
    of the remaining accesses move fewer than 16 bytes per thread; cites the source line with the most narrow
    accesses, and the message lists each width with its count."""
    ptx = k.ir("ptx")
    scalar_lines = set()
    if "ttgir" in k.texts:
        scalar_lines = {ln.src_line for ln in k.ir("ttgir").lines
                        if ln.src_line is not None and TTGIR_SCALAR_ACCESS_RE.search(ln.text)}
    narrow: list[tuple[IRLine, re.Match]] = []
    total = scalar = 0
    for ln in ptx.lines:
        m = PTX_GLOBAL_ACCESS_RE.search(ln.text)
        if not m:
            continue
        if not m.group("vec") and ln.src_line in scalar_lines:
            scalar += 1
            continue
        total += 1
        if _access_width(m) < 16:
            narrow.append((ln, m))
    if not total or not narrow:
        return []
    frac = len(narrow) / total
    if frac < 0.5:
        return []
    by_line = Counter(ln.src_line for ln, _ in narrow)
    worst_line = by_line.most_common(1)[0][0]
    ln, m = next(x for x in narrow if x[0].src_line == worst_line)
    kinds = Counter((_access_width(a), _access_name(a)) for _, a in narrow)
    widths = ", ".join(f"{n} x {w} bytes ({name})" for (w, name), n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))
    left_out = (f"; {scalar} load(s)/store(s) of one scalar per program left out (nothing can vectorize them)"
                if scalar else "")
    return [det.finding(k, f"{len(narrow)}/{total} global accesses move fewer than 16 bytes per thread: {widths}"
                           f"{left_out}; the compiler could not prove contiguity/alignment, or the block gives each "
                           "thread too few elements", ln, severity="high" if frac > 0.8 else "medium",
                        narrow_accesses=len(narrow), total_accesses=total, width_bytes=_access_width(m),
                        scalar_accesses=scalar)]


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
          "matrix product not lowered to tensor cores (or a multiply-and-sum product in the source)")
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
    span = _kernel_source_lines(k)
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
          "on sm_90 the dot uses mma.sync (Ampere MMA v2) instead of Hopper wgmma")
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
          "16-bit operands upcast to f32 before the dot: tf32 or FMA at a fraction of the 16-bit MMA rate")
def _fp32_dot(det: Detector, k: KernelIR) -> list[Finding]:
    """TTGIR `arith.extf` from f16/bf16 to f32 on a `#ttg.dot_op` operand: 16-bit data upcast right before the
    dot, so the MMA runs as tf32 (or FMA) instead of at the 16-bit rate."""
    hits = k.ir("ttgir").find(TTGIR_EXTF_DOT_RE)
    if not hits:
        return []
    return [det.finding(k, "dot operands are 16-bit values upcast to f32 (arith.extf) before the dot: the MMA runs in "
                           "tf32 at half the fp16/bf16 rate and moves twice the bytes through registers", hits[0],
                        severity="high", upcasts=len(hits))]


@detector("register_spills", "ir", ("ptx",), ("launch_config",),
          "ptxas spilled registers to local memory")
def _spills(det: Detector, k: KernelIR) -> list[Finding]:
    """ptxas `-v` reports spill stores/loads for the captured PTX (`resources` of the capture record)."""
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
    by_smem = lim["smem_per_sm"] // smem if smem else 10 ** 9  # no shared memory: no limit from it
    by_threads = lim["max_threads_per_sm"] // threads
    blocks = max(0, min(by_regs, by_smem, by_threads, lim["max_blocks_per_sm"]))
    limiter = min((("registers", by_regs), ("shared memory", by_smem), ("threads", by_threads),
                   ("blocks per SM", lim["max_blocks_per_sm"])), key=lambda x: x[1])[0]
    return {"blocks_per_sm": blocks, "warps_per_sm": blocks * k.num_warps,
            "occupancy": blocks * threads / lim["max_threads_per_sm"], "limiter": limiter}


@detector("low_occupancy", "ir", ("ptx",), ("launch_config",),
          "few warps resident per SM (from registers, shared memory and warps per program)")
def _low_occ(det: Detector, k: KernelIR) -> list[Finding]:
    """Occupancy estimate from registers/thread, shared memory/program and warps/program against the sm_90
    limits (65536 registers, 228 KB, 2048 threads, 32 programs per SM). Fires below 25% when the grid has
    at least one program per SM."""
    occ = occupancy(k)
    if occ["occupancy"] >= 0.25 or k.programs < k.limits["sm_count"]:
        return []
    return [det.finding(k, f"estimated occupancy {occ['occupancy']:.0%} ({occ['blocks_per_sm']} programs x "
                           f"{k.num_warps} warps per SM), limited by {occ['limiter']}", None, severity="medium",
                        **{kk: v for kk, v in occ.items()})]


@detector("grid_too_small", "ir", ("ttgir",), ("split_k", "persistent", "launch_config"),
          "fewer programs than SMs: part of the chip idles")
def _grid_small(det: Detector, k: KernelIR) -> list[Finding]:
    """Programs in the grid (from the launch) below the SM count (132 on H100 SXM unless the capture
    says otherwise)."""
    sms = k.limits["sm_count"]
    if k.programs >= sms:
        return []
    return [det.finding(k, f"grid has {k.programs} programs for {sms} SMs: {1 - k.programs / sms:.0%} of the SMs idle",
                        None, severity="high" if k.programs < sms / 2 else "medium", programs=k.programs, sms=sms)]


@detector("tail_effect", "ir", ("ttgir",), ("persistent", "launch_config"),
          "the last wave of programs leaves most SMs idle")
def _tail(det: Detector, k: KernelIR) -> list[Finding]:
    """Waves = programs / (programs per SM x SMs), with programs per SM from the occupancy estimate. Fires for
    1 to 8 waves when the last wave is at most half full."""
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
    """The largest block tensor in TTGIR has fewer than 1024 elements while the grid has at least 4 programs
    per SM: many programs doing little each."""
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
TTGIR_I64_ARITH_RE = re.compile(r"arith\.(?:muli|addi|extsi)\b.*(?:\b|\dx)i64\b")


@detector("int64_index_arithmetic", "ir", ("ttgir",), ("index_width",),
          "64-bit integer index arithmetic where 32 bits would do")
def _i64(det: Detector, k: KernelIR) -> list[Finding]:
    """Tensor-wide `arith.extsi/addi/muli` producing `i64` in TTGIR (scalar 64-bit math is not reported)."""
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
    """`tt.atomic_rmw` / `tt.atomic_cas` in TTGIR."""
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
    """Three or more `ttg.convert_layout` ops left in the final TTGIR (each may round-trip through shared memory)."""
    hits = k.ir("ttgir").find(TTGIR_CVT_RE)
    if len(hits) < 3:
        return []
    return [det.finding(k, f"{len(hits)} ttg.convert_layout ops remain after RemoveLayoutConversions", hits[0],
                        severity="medium", conversions=len(hits))]


# Masked load in a loop body (TTGIR):  %x = tt.load %ptr, %mask, %other : tensor<256x!tt.ptr<f32>, #blocked>
TTGIR_MASKED_LOAD_RE = re.compile(r"\btt\.load %\S+, %\S+")
# Loop header:  %acc = scf.for %i = %c0_i32 to %N step %c256_i32 iter_args(...) -> (...)
SCF_FOR_RE = re.compile(r"\bscf\.for\b")


@detector("masked_loads_in_loop", "ir", ("ttir",), ("mask_removal",),
          "loads inside a loop carry a mask on every iteration (masks written in the kernel, read from TTIR "
          "before the pipeliner adds its own predicates)")
def _masked_loop(det: Detector, k: KernelIR) -> list[Finding]:
    """`tt.load` with a mask operand inside an `scf.for`, read from TTIR: the masks the kernel wrote, before
    the software pipeliner adds its own predicates to `cp.async` copies."""
    f = _func(k, "ttir")
    if f is None:
        return []
    hits = [op for op in f.loads() if op.loops and op.name == "tt.load" and TTGIR_MASKED_LOAD_RE.search(op.text)]
    if not hits:
        return []
    return [det.finding(k, f"{len(hits)} masked load(s) inside a loop: the bound check runs every iteration "
                           "even where the shape divides the block", hits[0].line, stage="ttir", severity="low",
                        masked_loads=len(hits))]


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
BLOCKED_LAYOUT_RE = re.compile(r"^(#blocked\d*) = #ttg\.blocked<\{sizePerThread = \[(?P<spt>[\d, ]+)\].*?order = \[(?P<order>[\d, ]+)\]", re.MULTILINE)
# Contiguity the axis analysis found for a pointer, printed on async copies:  {contiguity = 2 : i32}
CONTIGUITY_RE = re.compile(r"contiguity = (\d+)")


@detector("coalesce_layout", "compiler", ("passes",), ("alignment_hints", "launch_config"),
          "the coalescing pass gave each thread a small contiguous chunk")
def _coalesce(det: Detector, k: KernelIR) -> list[Finding]:
    """In the dump right after `TritonGPUCoalesce`, a blocked layout used by a `tt.load`/`tt.store` with
    sizePerThread product 1: the pass could give each thread only one element per access (contiguity or
    alignment unknown, or too few elements per thread). Cites the access that uses the layout."""
    after = _after(k, "TritonGPUCoalesce")
    if after is None:
        return []
    layouts = {m.group(1): (m.group("spt"), m.group("order")) for m in BLOCKED_LAYOUT_RE.finditer(after)}
    defs = {ln.split(" =", 1)[0]: ln.strip() for ln in after.splitlines() if ln.startswith("#blocked")}
    f = kernel_func(after, name=k.name)
    # only the layouts that global loads/stores use after coalescing
    used: dict[str, IRLine] = {}
    for op in (f.ops if f else []):
        if op.name in ("tt.load", "tt.store"):
            for m in re.finditer(r"#blocked\d*\b", op.text):
                if m.group(0) in layouts:
                    used.setdefault(m.group(0), op.line)
    out = []
    for name, line in used.items():
        spt, order = layouts[name]
        per_thread = 1
        for d in spt.split(","):
            per_thread *= int(d)
        if per_thread == 1:
            out.append(det.finding(k, f"TritonGPUCoalesce chose {name} with sizePerThread=[{spt}] order=[{order}] for "
                                      f"this global access ({defs.get(name, name)}): one element per thread per "
                                      "access (no vector access)", line,
                                   stage="passes", severity="medium", size_per_thread=spt, order=order))
    return out[:1]


@detector("accelerate_matmul_result", "compiler", ("passes",), ("tl_dot", "launch_config"),
          "what TritonGPUAccelerateMatmul did with each dot")
def _accel(det: Detector, k: KernelIR) -> list[Finding]:
    """In the dump right after `TritonGPUAccelerateMatmul`: no `ttng.warp_group_dot` and no
    `nvidia_mma<{versionMajor = 3` layout, i.e. the dot became MMA v2 or stayed FMA."""
    before = _before(k, "TritonGPUAccelerateMatmul")
    after = _after(k, "TritonGPUAccelerateMatmul")
    if before is None or after is None or "tt.dot" not in before:
        return []
    if "warp_group_dot" in after or "nvidia_mma<{versionMajor = 3" in after:
        return []  # wgmma: nothing to fix here
    m = re.search(r"nvidia_mma<\{versionMajor = (\d+)", after)
    version = m.group(1) if m else None
    f = kernel_func(after, name=k.name)
    dot = next((op.line for op in (f.ops if f else []) if op.name == "tt.dot"), None)
    what = f"MMA v{version}" if version else "no MMA layout (FMA dot)"
    return [det.finding(k, f"AccelerateMatmul produced {what} instead of Hopper wgmma (v3)",
                        dot, stage="passes", severity="high", mma_version=version or "none")]


def _after_pass(k: KernelIR, pass_name: str) -> str | None:
    """IR after a whole pass: the next dump that is not one of the pass's internal sub-step dumps."""
    ps = k.passes
    for i, p in enumerate(ps):
        if p.name == pass_name:
            for q in ps[i + 1:]:
                if not q.name.startswith("SoftwarePipeliner."):
                    return q.text
            return None
    return None


@detector("unpipelined_loop", "compiler", ("passes",), ("pipelining", "launch_config"),
          "the software pipeliner left a loop with global loads unpipelined")
def _pipeline(det: Detector, k: KernelIR) -> list[Finding]:
    """Loops of the dump before `TritonGPUPipeline` that hold tensor `tt.load`s; fires when the IR after the
    whole pass (past its internal LowerLoops/ExpandLoops dumps) still has plain tensor `tt.load`s inside
    loops (by default only loads that feed a dot are pipelined)."""
    before = _before(k, "TritonGPUPipeline")
    after = _after_pass(k, "TritonGPUPipeline")
    if before is None or after is None or not SCF_FOR_RE.search(before):
        return []
    fb = kernel_func(before, name=k.name)
    fa = kernel_func(after, name=k.name)
    if fb is None or fa is None:
        return []
    loops_with_loads = [lp for lp in fb.loop_ops()
                        if any(lp.idx in op.loops and op.name == "tt.load" and fb.pointer_type(op) for op in fb.loads())]
    if not loops_with_loads:
        return []
    # after the pass: loops whose loads are still plain (synchronous) tt.load of a tensor of pointers
    plain_after = [op for op in fa.loads() if op.loops and op.name == "tt.load" and fa.pointer_type(op)]
    async_after = [op for op in fa.loads() if op.loops and op.name != "tt.load"]
    if not plain_after:
        return []
    reason = f"num_stages={k.num_stages}" if k.num_stages <= 1 else "loads feed no dot (only dot operands are " \
                                                                    "pipelined by default) or depend on the loop"
    line = plain_after[0].line
    return [det.finding(k, f"TritonGPUPipeline left {len(plain_after)} tensor load(s) in loops as plain tt.load "
                           f"({len(async_after)} became async copies; {reason}): each iteration waits on its "
                           "global loads", line, stage="passes", severity="medium", num_stages=k.num_stages,
                        plain_loads=len(plain_after), async_loads=len(async_after))]


@detector("layout_conversions_survived", "compiler", ("passes",), ("launch_config",),
          "layout conversions RemoveLayoutConversions could not remove")
def _cvt_passes(det: Detector, k: KernelIR) -> list[Finding]:
    """Counts `ttg.convert_layout` before the first and after the last `TritonGPURemoveLayoutConversions`;
    fires when two or more survive. Cites the first surviving conversion."""
    ps = k.passes
    idx = [i for i, p in enumerate(ps) if p.name == "TritonGPURemoveLayoutConversions"]
    if not idx or idx[-1] + 1 >= len(ps):
        return []
    before = ps[idx[0]].text.count("ttg.convert_layout")
    after_text = ps[idx[-1] + 1].text
    after = after_text.count("ttg.convert_layout")
    if after < 2:
        return []
    f = kernel_func(after_text, name=k.name)
    first = next((op.line for op in (f.ops if f else []) if op.name == "ttg.convert_layout"), None)
    return [det.finding(k, f"{after} convert_layout ops survive RemoveLayoutConversions (had {before} before its "
                           "first run)", first, stage="passes", severity="low", before=before, after=after)]


# ---------------------------------------------------------------------------------------------
# IR tier: dataflow detectors (def-use over the final TTGIR, see tools/ir/ssa.py)
# ---------------------------------------------------------------------------------------------

# cp.async in PTX with its copy size in bytes:
#   cp.async.ca.shared.global [ %r103 + 0 ], [ %rd29 + 0 ], 0x8, %r104;
PTX_CP_ASYNC_RE = re.compile(r"\bcp\.async\.(?:ca|cg)\.shared\.global\S*\s+\[[^\]]*\],\s*\[[^\]]*\],\s*(?P<size>0x[0-9a-fA-F]+|\d+)")
# TMA bulk tensor copy in PTX:
#   @%p2 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r13], [%rd2, {%r165, %r14}], [%r10];
PTX_TMA_RE = re.compile(r"\bcp\.async\.bulk\.tensor\b")
# Input precision of a dot in TTIR (absent = ieee, the printer omits the default):
#   %acc_26 = tt.dot %a_16, %b_25, %acc_5, inputPrecision = tf32 : tensor<64x32xf32> * tensor<32x64xf32> -> tensor<64x64xf32>
TTIR_DOT_PRECISION_RE = re.compile(r"inputPrecision = (?P<prec>\w+)")


def _ptx_access_widths(k: KernelIR) -> dict[int | None, list[int]]:
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


def _memory_ops(f: Func) -> list:
    return f.loads() + [op for op in f.stores() if op.name == "tt.store"]


def _fast_dims(lay: Layout, shape: tuple[int, ...]) -> tuple[int | None, int | None]:
    """(order[0], the first dim in order along which lanes of a warp vary)."""
    order = lay.order
    if not order or len(order) != len(shape):
        return None, None
    tpw = lay.ints("threadsPerWarp")
    lane = next((d for d in order if d < len(tpw) and tpw[d] > 1 and shape[d] > 1), order[0])
    return order[0], lane


@detector("missing_alignment_info", "ir", ("ttgir", "ptx"), ("alignment_hints", "mask_removal"),
          "an argument that feeds a contiguous access has no tt.divisibility (pointer not 16-byte aligned, integer "
          "not a multiple of 16, or not specialized), and the PTX access is narrower than 16 bytes")
def _missing_alignment(det: Detector, k: KernelIR) -> list[Finding]:
    """For every global access (tt.load/tt.store, cp.async) whose layout's fastest dimension is unit-stride
    (the access *could* be vectorized), collect the function arguments that reach its address or mask
    (def-use closure over TTGIR). Fires when one of them has no `tt.divisibility` and the PTX accesses at
    that source line are narrower than 16 bytes. The JIT adds `tt.divisibility = 16` only to a pointer whose
    address is 16-byte aligned and to an integer that is a multiple of 16 (and never to an argument in
    `do_not_specialize`); a bare `triton.compile` without attrs has none. An unaligned pointer limits the
    access width directly; an unaligned bound (`offs < n`) limits it through the mask's constancy. Suggests
    `alignment_hints` always and `mask_removal` only when an unaligned integer reaches the mask (an unmasked
    fast path removes that limit; it cannot fix an unaligned address)."""
    f = _func(k)
    if f is None:
        return []
    widths = _ptx_access_widths(k)
    out, seen_lines = [], set()
    for op in _memory_ops(f):
        pt = f.pointer_type(op)
        lay = f.layout(pt)
        if pt is None or lay is None or lay.kind != "ttg.blocked":
            continue
        fast, _ = _fast_dims(lay, pt.shape)
        if fast is None or pt.shape[fast] < 2:
            continue
        addr, mask = f.address_operand(op), f.mask_operand(op)
        st = strides(f, addr)
        if len(st) != len(pt.shape) or st[fast].kind != "unit":
            continue  # not contiguous along the fast dim: alignment is not what limits it
        mask_roots = f.arg_origins(mask) if mask else set()
        roots = f.arg_origins(addr) | mask_roots
        missing = sorted((a for a in roots if a in f.args and f.args[a].divisibility is None
                          and (f.args[a].is_pointer or f.args[a].is_int)), key=lambda a: f.args[a].index)
        if not missing or op.src_line in seen_lines:
            continue
        w = widths.get(op.src_line, [])
        cm = CONTIGUITY_RE.search(op.body) if op.name == "ttg.async_copy_global_to_local" else None
        if cm:  # the pipeliner records the contiguity it copies with: {contiguity = 1 : i32} = 1 element per cp.async
            w = [int(cm.group(1)) * pt.elem_bytes]
        if w and min(w) >= 16:
            continue
        spt = lay.ints("sizePerThread")
        layout_bytes = min(16, (spt[fast] if fast < len(spt) else 1) * pt.elem_bytes)
        seen_lines.add(op.src_line)
        what = ", ".join(f"{display(a)} ({'pointer' if f.args[a].is_pointer else f.args[a].type})" for a in missing)
        ptx_note = (f"the PTX moves {min(w)} bytes per access where the layout gives {layout_bytes}" if w else
                    "no PTX access maps to this line")
        bound = any(a in mask_roots and f.args[a].is_int for a in missing)
        fd = det.finding(
            k, f"{what} carr{'ies' if len(missing) == 1 else 'y'} no tt.divisibility, so the axis analysis cannot "
               f"prove the contiguous {op.name} aligned; {ptx_note}. The JIT marks an argument 16-divisible only "
               "when its value is (16-byte-aligned pointer, integer multiple of 16) and it is not in "
               "do_not_specialize", op.line, severity="high" if w and min(w) < layout_bytes else "medium",
            arguments=",".join(display(a) for a in missing), ptx_bytes=min(w) if w else 0, layout_bytes=layout_bytes,
            unaligned_bound=bound)
        if not bound:
            fd.suggests = [s for s in fd.suggests if s != "mask_removal"]
        out.append(fd)
    return out


@detector("uncoalesced_access", "ir", ("ttgir",), ("alignment_hints", "launch_config", "tile_2d"),
          "the layout's fastest dimension is not the pointer's contiguous one: consecutive lanes touch addresses "
          "a stride apart (strided or transposed access)")
def _uncoalesced(det: Detector, k: KernelIR) -> list[Finding]:
    """For every global access with a blocked layout, the dimension along which consecutive lanes of a warp
    vary (first dim in `order` with threadsPerWarp > 1) is checked against the per-dimension stride of the
    address, re-derived from the def-use chain (`make_range`, `splat`, `expand_dims`, `broadcast`, `addi`,
    `muli`, `addptr`, `remsi`). Fires when that dimension is scaled by a runtime stride or by a constant of
    more than 4 bytes: lanes touch addresses a stride apart. The message says whether another dimension
    is unit-stride (a transposed access: the layout's order does not match the pointer's contiguous
    dimension, e.g. contiguity hidden behind a modulo) or none is provably unit-stride (a stride of 1 that
    the JIT did not specialize). Gathers (offsets loaded from memory) are not reported."""
    f = _func(k)
    if f is None:
        return []
    out, seen_lines = [], set()
    for op in _memory_ops(f):
        pt = f.pointer_type(op)
        lay = f.layout(pt)
        if pt is None or lay is None or lay.kind != "ttg.blocked":
            continue
        _, lane = _fast_dims(lay, pt.shape)
        if lane is None or pt.shape[lane] < 2:
            continue
        st = strides(f, f.address_operand(op))
        if len(st) != len(pt.shape):
            continue
        s = st[lane]
        if s.kind != "scaled" or (s.factor is not None and s.factor < 2):
            continue
        if op.src_line in seen_lines:
            continue
        seen_lines.add(op.src_line)
        unit = [d for d, x in enumerate(st) if x.kind == "unit" and pt.shape[d] > 1]
        stride = f"{s.factor} elements" if s.factor else (display(s.by) if s.by else "a runtime stride")
        if unit:
            why = (f"the pointer is contiguous along dim {unit[0]}"
                   f"{' (through a modulo the axis analysis cannot see through)' if st[unit[0]].wraps else ''}, "
                   f"but the layout orders dim {lane} fastest (order={lay.order}): a transposed access")
        elif sum(1 for d in pt.shape if d > 1) <= 1:
            why = ("the block walks a strided dimension (a column of a row-major matrix, an interleaved field); a "
                   "tile that puts a contiguous dimension on the lanes reads whole lines")
        else:
            why = ("no dimension is provably unit-stride (a stride equal to 1 is only known when the JIT specializes "
                   "it; do_not_specialize or a computed stride hides it)")
        stride_bytes = None if s.factor is None else s.factor * pt.elem_bytes
        eff = pt.elem_bytes / min(32, stride_bytes) if stride_bytes else pt.elem_bytes / 32
        out.append(det.finding(
            k, f"{op.name} of a {'x'.join(map(str, pt.shape))} {pt.pointee} tile: consecutive lanes along dim {lane} "
               f"are {stride} apart, so a warp access uses ~{eff:.0%} of the 32-byte sectors it fetches; {why}",
            op.line,
            severity="high" if s.factor is None or s.factor * pt.elem_bytes >= 32 else "medium" if s.factor * pt.elem_bytes > 4 else "low",
            lane_dim=lane, stride=str(s.factor or (display(s.by) if s.by else "runtime")), order=str(lay.order),
            contiguous_dim=unit[0] if unit else -1))
    return out


@detector("fp32_dot_without_tf32", "ir", ("ttir",), ("tl_dot",),
          "fp32 tl.dot computed in full precision (inputPrecision = ieee: FMA on CUDA cores) although the task's "
          "tolerance admits tf32 tensor cores")
def _fp32_ieee(det: Detector, k: KernelIR) -> list[Finding]:
    """A TTIR `tt.dot` on f32 operands whose `inputPrecision` is ieee (the printer omits the default, so no
    attribute means ieee) or tf32x3. Fires only when the task's TOLERANCE for float32 has rtol >= 1e-3
    (tf32 keeps a 10-bit mantissa, ~1e-3 relative error per product), or at low severity when the task
    states no float32 tolerance; a tighter tolerance keeps ieee as the right choice."""
    f = _func(k, "ttir")
    if f is None:
        return []
    tol = _task_tolerance(k.source).get("float32")
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


@detector("redundant_recomputation", "ir", ("ttgir",), ("persistent", "launch_config"),
          "work repeated across programs: a grid axis whose program id reaches no store, or a block every program "
          "loads at the same address (depends on no program id)")
def _redundant(det: Detector, k: KernelIR) -> list[Finding]:
    """Two practical signals from the program-id dependence of the TTGIR (forward closure from each
    `tt.get_program_id` through every op, loop-carried values included):
    (1) a grid axis with more than one program whose program id reaches no store address, value or mask:
    every program along it writes the same outputs; (2) tensor loads whose address depends on no program
    id at all (at least 512 bytes per program): every program loads the same block (a weight or bias
    vector, or the whole input). Limits: it does not flag loads that depend on only some axes (a matmul's
    A tile is re-read by every program along N by design; that reuse is served by L2 and is what grouped
    ordering tunes), it cannot see reuse through L2, and block sizes are per program per loop iteration."""
    f = _func(k)
    if f is None or k.programs <= 1:
        return []
    out = []
    axes = {"x": 0, "y": 1, "z": 2}
    stores = f.stores()
    reach: set[str] = set()
    for op in stores:
        for v in op.operands:
            reach |= f.pid_axes(v)
    for axis, i in axes.items():
        n = k.grid[i] if i < len(k.grid) else 1
        if n > 1 and axis not in reach and stores:
            used = axis in set(f.pid_values.values())
            out.append(det.finding(
                k, f"grid axis {i} has {n} programs but tl.program_id({i}) {'reaches' if used else 'is read by'} no "
                   f"store address, value or mask: the {n} programs along it compute and write the same outputs "
                   f"({n}x the work)", stores[0].line, severity="high", axis=i, programs_on_axis=n))
    invariant, dependent = [], 0
    for op in f.loads():
        pt = f.pointer_type(op)
        if op.name in ("tt.load", "ttg.async_copy_global_to_local") and pt is None:
            continue  # scalar loads
        pids = set().union(*(f.pid_axes(v) for v in f.address_values(op)))
        nbytes = pt.numel * pt.elem_bytes if pt else 0
        if not pids:
            invariant.append((op, nbytes))
        else:
            dependent += nbytes
    inv_bytes = sum(b for _, b in invariant)
    if invariant and inv_bytes >= 512:
        op = invariant[0][0]
        out.append(det.finding(
            k, f"{len(invariant)} load(s) ({inv_bytes} B per program{' per iteration' if op.loops else ''}) use an "
               f"address that depends on no program id: all {k.programs} programs read the same block "
               f"({dependent} B of per-program data next to it); a program that handles several rows/tiles reuses it "
               "from registers", op.line, severity="medium" if inv_bytes >= max(dependent, 1) else "low",
            invariant_bytes=inv_bytes, dependent_bytes=dependent, programs=k.programs))
    return out


def _exclusive(f: Func, a: int, b: int) -> bool:
    """Ops ``a`` and ``b`` sit in the two arms of one scf.if (only one of them runs per call)."""
    oa, ob = f.ops[a], f.ops[b]
    shared = set(oa.regions) & set(ob.regions)
    return any(f.ops[i].name == "scf.if" and ((i in oa.else_arms) != (i in ob.else_arms)) for i in shared)


def _one_arm(f: Func, loops: list[int]) -> list[int]:
    """The largest group of ``loops`` that can all run in one call: loops in the then and else regions
    of one scf.if (an EVEN fast path and its masked twin) are one pass each way, not two passes."""
    best: list[int] = []
    for first in loops:
        group = [first]
        for lp in loops:
            if lp != first and not any(_exclusive(f, lp, g) for g in group):
                group.append(lp)
        if len(group) > len(best):
            best = group
    return sorted(best)


@detector("multi_pass_reduction", "ir", ("ttgir",), ("fuse_passes",),
          "several loops in one kernel stream the same base pointer argument: the data is read once per pass")
def _multi_pass(det: Detector, k: KernelIR) -> list[Finding]:
    """Loads inside loops are grouped by the pointer argument their address derives from and by their
    innermost loop; fires when one argument is streamed by two or more sibling loops (not nested in each
    other): the same data is read from memory once per pass (mean, then variance, then normalize)."""
    f = _func(k)
    if f is None:
        return []
    by_arg: dict[str, dict[int, object]] = {}
    for op in f.loads():
        if not op.loops:
            continue
        for a in set().union(*(f.arg_origins(v) for v in f.address_values(op))):
            arg = f.args.get(a)
            if arg is None or not (arg.is_pointer or arg.type.startswith("!tt.tensordesc")):
                continue
            by_arg.setdefault(a, {}).setdefault(op.loops[-1], op)
    out = []
    for a, loops in by_arg.items():
        # sibling loops only: a loop nested in another is the same pass
        tops = [lp for lp in loops if not any(lp != other and other in f.ops[lp].loops for other in loops)]
        tops = _one_arm(f, tops)
        if len(tops) < 2:
            continue
        ops = [loops[lp] for lp in sorted(tops)]
        lines = [o.src_line for o in ops]
        out.append(det.finding(
            k, f"{display(a)} is read in {len(tops)} separate loops (loads at lines "
               f"{', '.join(str(x) for x in lines)}): the same data crosses the memory bus {len(tops)} times; one "
               "pass with running statistics (online max/sum, Welford) reads it once", ops[0].line,
            severity="high" if len(tops) >= 3 else "medium", passes=len(tops), argument=display(a)))
    return out


# Shared-memory read/write with its descriptor and register tensor:
#   %a_72 = ttg.local_load %a_71 token %a_70 : !ttg.memdesc<64x32xf32, #shared, #smem, mutable> -> tensor<64x32xf32, #ttg.dot_op<{opIdx = 0, parent = #blocked}>>
#   ttg.local_store %x, %buf : tensor<64x64xf32, #blocked> -> !ttg.memdesc<64x64xf32, #shared, #smem, mutable>
MEMDESC_RE = re.compile(r"memdesc<(?P<shape>(?:\d+x)+)(?P<elem>[a-z]+\d*),\s*(?P<enc>#[\w.]+(?:<\{[^}]*\}>)?)")
# Dot-operand encoding of a register tensor:  #ttg.dot_op<{opIdx = 0, parent = #blocked}>
DOT_OP_ENC_RE = re.compile(r"#ttg\.dot_op<\{opIdx = (?P<idx>\d), parent = (?P<parent>#[\w.]+(?:<\{[^}]*\}>)?)")


def _lane_rows(enc: str | None, shape: tuple[int, ...], layouts: dict[str, Layout]) -> tuple[int, int] | None:
    """(dim along which lanes of a warp take different rows/columns, how many distinct ones) for a register layout."""
    if not enc:
        return None
    m = DOT_OP_ENC_RE.search(enc)
    if m:
        idx = int(m.group("idx"))
        dim = 0 if idx == 0 else 1        # lanes vary along M for A, along N for B (K is the loop dim)
        parent = layout_of(m.group("parent"), layouts)
        if parent is not None and parent.kind == "ttg.blocked":
            tpw = parent.ints("threadsPerWarp")
            return dim, tpw[dim] if dim < len(tpw) else 1
        return dim, 8                       # mma operands: ldmatrix reads 8 rows per 8x8 tile
    lay = layout_of(enc, layouts)
    if lay is None or lay.kind != "ttg.blocked":
        return None
    _, lane = _fast_dims(lay, shape)
    if lane is None:
        return None
    tpw = lay.ints("threadsPerWarp")
    return lane, tpw[lane] if lane < len(tpw) else 1


@detector("shared_memory_bank_conflicts", "ir", ("ttgir",), ("tl_dot", "launch_config"),
          "a register layout reads or writes an unswizzled shared buffer across its rows: lanes land in the same "
          "bank (estimated n-way conflict)")
def _bank_conflicts(det: Detector, k: KernelIR) -> list[Finding]:
    """Heuristic on TTGIR: a `ttg.local_load`, `ttg.local_store` or `ttg.local_alloc` from registers whose
    shared buffer is `#ttg.swizzled_shared<{vec = 1, perPhase = 1, maxPhase = 1}>` (no swizzle: every row
    starts in bank 0) and whose register layout spreads the lanes of a warp across rows of the buffer
    (the lane dimension is not the buffer's contiguous `order[0]`): a transposed access. For a blocked
    layout the lane dimension is the first in `order` with threadsPerWarp > 1; for a `#ttg.dot_op` it is
    M for operand A and N for operand B (threadsPerWarp of the parent; 8 rows for an MMA parent). With a
    row pitch of P 4-byte words, L lanes on different rows hit 32/gcd(P, 32) distinct banks, so the
    estimate is ceil(L / min(L, 32/gcd(P, 32)))-way; fires from 4-way. Swizzled and NVMMA layouts, 1-D
    buffers (barriers) and async-copy-only buffers are not considered."""
    f = _func(k)
    if f is None:
        return []
    out, seen = [], set()
    for op in f.ops:
        if op.name not in ("ttg.local_load", "ttg.local_store", "ttg.local_alloc"):
            continue
        md = MEMDESC_RE.search(op.body)
        if not md:
            continue
        shared = layout_of(md.group("enc"), f.layouts)
        if shared is None or shared.kind != "ttg.swizzled_shared" or shared.num("maxPhase", 1) != 1:
            continue
        shape = tuple(int(x) for x in md.group("shape").split("x") if x)
        if len(shape) < 2:
            continue  # barriers and 1-D buffers
        shape = shape[-2:]  # a multi-buffered allocation (stages x rows x cols) is read one buffer at a time
        reg = op.result_type if op.name == "ttg.local_load" else next(iter(op.operand_types), None)
        if reg is None:
            continue  # an allocation without a register source (filled by async copies)
        lr = _lane_rows(reg.enc, reg.shape, f.layouts)
        order = shared.order
        if lr is None or not order:
            continue
        lane_dim, lanes = lr
        fast = order[0] if len(order) == len(shape) else len(shape) - 1
        if lane_dim == fast or lanes < 2:
            continue  # lanes walk along the contiguous dimension of the buffer: no conflict
        pitch_words = max(1, shape[fast] * elem_bytes_of(md.group("elem")) // 4)
        distinct_banks = 32 // math.gcd(pitch_words, 32)
        ways = math.ceil(lanes / min(lanes, distinct_banks))
        if ways < 4 or op.src_line in seen:
            continue
        seen.add(op.src_line)
        out.append(det.finding(
            k, f"{op.name} of a {'x'.join(map(str, shape))} {md.group('elem')} buffer in {md.group('enc')} "
               f"(vec={shared.num('vec', 1)}, perPhase={shared.num('perPhase', 1)}, maxPhase=1: no swizzle, "
               f"order={order}): {lanes} lanes of a warp access "
               f"different rows along dim {lane_dim}, {shape[fast] * elem_bytes_of(md.group('elem'))} bytes apart, "
               f"which map to the same bank: ~{ways}-way bank conflict", op.line,
            severity="high" if ways >= 16 else "medium", ways=ways, lanes=lanes,
            row_bytes=shape[fast] * elem_bytes_of(md.group("elem"))))
    return out


def elem_bytes_of(ty: str) -> int:
    m = re.search(r"(\d+)$", ty)
    return max(1, int(m.group(1)) // 8) if m else 4


# Kernel launch in the task's launcher:  axpy_kernel[grid](x, y, out, n, ...)
LAUNCH_CALL_RE = r"\b{name}\s*\["
LAUNCH_OVERHEAD_US = 3.0          # CPU launch + GPU scheduling, per launch (order of magnitude on H100)
HBM_BYTES_PER_US = 3.0e6          # ~3 TB/s


@detector("launch_overhead_dominating", "ir", ("ttgir",), ("fuse_launches", "launch_config"),
          "several launches in one launch() that each move little data: per-launch overhead (~3 us) is comparable "
          "to their run time", scope="capture")
def _launch_overhead(det: Detector, kernels: list[KernelIR]) -> list[Finding]:
    """Looks at every launch one `launch()` made (capture scope). A launch is small when its kernel has
    no loop and the bytes it addresses (tensor loads and stores x programs) take under ~3 us at 3 TB/s,
    i.e. about the cost of the launch itself. Fires with two or more small launches (medium when all
    launches are small); cites the kernel call in the launcher."""
    if len(kernels) < 2:
        return []
    small = []
    for k in kernels:
        f = _func(k)
        if f is None:
            continue
        has_loop = bool(f.loop_ops())
        moved = 0
        for op in _memory_ops(f):
            pt = f.pointer_type(op)
            moved += pt.numel * pt.elem_bytes if pt else 4
        total = moved * k.programs
        est_us = total / HBM_BYTES_PER_US
        if not has_loop and est_us < LAUNCH_OVERHEAD_US:
            small.append((k, total, est_us))
    if len(small) < 2:
        return []
    k0 = small[0][0]
    line = None
    m = re.search(LAUNCH_CALL_RE.format(name=re.escape(k0.name)), k0.source)
    if m:
        line = IRLine(-1, k0.source[m.start():].splitlines()[0].strip(), src_line=k0.source[:m.start()].count("\n") + 1,
                      src_file=k0.source_path)
    names = Counter(k.name for k, _, _ in small)
    what = ", ".join(f"{n} x {name}" for name, n in names.items())
    return [det.finding(
        k0, f"{len(kernels)} launches in one launch(); {len(small)} of them ({what}) move under "
            f"{max(t for _, t, _ in small) // 1024 + 1} KiB each (~{max(e for _, _, e in small):.2f} us of memory "
            f"time against ~{LAUNCH_OVERHEAD_US:g} us launch overhead): fuse them into one launch or batch the work",
        line, stage="source" if line else "ttgir", severity="medium" if len(small) == len(kernels) else "low",
        launches=len(kernels), small_launches=len(small),
        bytes_per_small_launch=int(sum(t for _, t, _ in small) / len(small)))]


# ---------------------------------------------------------------------------------------------
# Compiler facts and shared memory
# ---------------------------------------------------------------------------------------------

# Module attribute set by AllocateSharedMemory (visible in the pass dumps from then on):
#   module attributes {..., "ttg.num-warps" = 4 : i32, ttg.shared = 32768 : i32, ttg.target = "cuda:90", ...}
TTG_SHARED_ATTR_RE = re.compile(r"\bttg\.shared = (?P<bytes>\d+) : i32")
SM90_MAX_SMEM_PER_PROGRAM = 227 * 1024


@detector("shared_memory_occupancy", "ir", ("ttgir",), ("launch_config",),
          "shared memory per program (ttg.shared) against the 228 KB of an sm_90 SM: over the limit, or so large "
          "that only one program fits per SM")
def _smem(det: Detector, k: KernelIR) -> list[Finding]:
    """Shared memory per program from the compiled metadata (the `ttg.shared` module attribute that
    AllocateSharedMemory sets, also read from the pass dumps), against 227 KB per program and 228 KB per
    SM on sm_90. High above 227 KB (the launch fails); medium when only one program fits per SM. Cites
    the largest `ttg.local_alloc`."""
    smem = int(k.resources.get("shared_bytes", 0) or k.record.get("metadata", {}).get("shared", 0) or 0)
    attr_line = None
    if "passes" in k.texts:
        m = None
        for m in TTG_SHARED_ATTR_RE.finditer(k.texts["passes"]):
            pass
        if m:
            smem = smem or int(m.group("bytes"))
            attr_line = f"ttg.shared = {m.group('bytes')} : i32"
    if not smem:
        return []
    lim = k.limits
    per_sm = lim["smem_per_sm"] // smem
    f = _func(k)
    allocs = [op for op in (f.ops if f else []) if op.name == "ttg.local_alloc"]
    biggest = None
    for op in allocs:
        md = MEMDESC_RE.search(op.body)
        if md:
            n = 1
            for d in md.group("shape").split("x"):
                n *= int(d) if d else 1
            n *= elem_bytes_of(md.group("elem"))
            if biggest is None or n > biggest[1]:
                biggest = (op, n)
    line = biggest[0].line if biggest else (IRLine(-1, attr_line) if attr_line else None)
    occ = occupancy(k)
    if smem > SM90_MAX_SMEM_PER_PROGRAM:
        return [det.finding(k, f"{smem} B of shared memory per program exceeds the {SM90_MAX_SMEM_PER_PROGRAM} B an "
                               "sm_90 program may use: the launch fails with OutOfResources", line, severity="high",
                            shared_bytes=smem, programs_per_sm=0)]
    if per_sm <= 1:
        return [det.finding(k, f"{smem} B of shared memory per program (largest buffer "
                               f"{biggest[1] if biggest else smem} B): only one program fits per SM "
                               f"({k.num_warps} warps resident, {occ['occupancy']:.0%} occupancy); fewer stages or "
                               "smaller tiles let two programs overlap", line, severity="medium",
                            shared_bytes=smem, programs_per_sm=per_sm)]
    return []


@detector("async_load_path", "compiler", ("ttgir",), ("pipelining",),
          "how the loads in loops were lowered: TMA (async_tma_copy), cp.async (async_copy_global_to_local) or "
          "plain synchronous tt.load")
def _load_path(det: Detector, k: KernelIR) -> list[Finding]:
    """A compiler fact from the final TTGIR: the global reads inside loops and how they were lowered:
    `ttng.async_tma_copy_global_to_local` (TMA), `ttg.async_copy_global_to_local` (cp.async) or plain
    `tt.load` (synchronous ld.global), with the matching PTX instruction counts (`cp.async.bulk.tensor`,
    `cp.async`, `ld.global`). Info when every loop load is asynchronous, low when plain loads remain."""
    f = _func(k)
    if f is None:
        return []
    in_loops = [op for op in f.loads() if op.loops]
    if not in_loops:
        return []
    tma = [op for op in in_loops if op.name in ("ttng.async_tma_copy_global_to_local", "ttng.async_tma_gather")]
    cp = [op for op in in_loops if op.name == "ttg.async_copy_global_to_local"]
    plain = [op for op in in_loops if op.name in ("tt.load", "tt.descriptor_load") and
             (f.pointer_type(op) is not None or op.name == "tt.descriptor_load")]
    ptx = k.texts.get("ptx", "")
    ptx_counts = {"cp.async.bulk.tensor": len(PTX_TMA_RE.findall(ptx)),
                  "cp.async": len(PTX_CP_ASYNC_RE.findall(ptx)),
                  "ld.global": sum(1 for m in PTX_GLOBAL_ACCESS_RE.finditer(ptx) if m.group("op") == "ld")}
    parts = []
    if tma:
        parts.append(f"{len(tma)} TMA copies (ttng.async_tma_copy_global_to_local)")
    if cp:
        parts.append(f"{len(cp)} cp.async copies (ttg.async_copy_global_to_local)")
    if plain:
        parts.append(f"{len(plain)} plain tt.load (synchronous ld.global)")
    if not parts:
        return []
    first = (plain or cp or tma)[0]
    sev: Severity = "low" if plain else "info"
    tail = "; the plain loads stall each iteration until the data arrives" if plain else \
        "; the loop's loads are asynchronous and overlap with compute"
    return [det.finding(k, "loads in loops: " + ", ".join(parts) + tail + " (PTX: " +
                        ", ".join(f"{n} {kk}" for kk, n in ptx_counts.items()) + ")", first.line, stage="ttgir",
                        severity=sev, tma=len(tma), cp_async=len(cp), plain=len(plain), **{
                            "ptx_" + kk.replace(".", "_"): n for kk, n in ptx_counts.items()})]


# ---------------------------------------------------------------------------------------------
# Compiler tier: which passes changed the IR
# ---------------------------------------------------------------------------------------------

# Location alias lines are not IR content for the diff:
#   #loc12 = loc("/work/main/examples/add_tiny_block.py":18:37)
_DIFF_DROP_RE = re.compile(r"^#loc\d*\s*=")
# Attribute alias definitions (expanded inline so alias and inline printing compare equal):
#   #blocked1 = #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
_ALIAS_DEF_RE = re.compile(r"^(?P<name>#[A-Za-z_][\w]*)\s*=\s*(?P<body>#.*)$")
# A reference to an alias:  tensor<1024xi32, #blocked1>
_ALIAS_REF_RE = re.compile(r"#[A-Za-z_][\w]*")
# SSA value names (all replaced by %v: passes rename freely and the pipeliner's internal dumps print %0, %arg0):
#   %offs_2      %acc_57#0      %arg10
_SSA_NAME_RE = re.compile(r"%[\w$.\-]+")
# Layout definitions and loop headers that make up the "structure" the summary reports:
#   %acc_57:7 = scf.for %acc_59 = %c0_i32 to %K step %c32_i32 iter_args(...) -> (...) : i32 {
_LOOP_HEAD_RE = re.compile(r"\bscf\.(?:for|while)\b")


def _strip_locs(line: str) -> str:
    """Remove every ``loc(...)`` (balanced parentheses) from a line."""
    out, i = [], 0
    while True:
        j = line.find("loc(", i)
        if j < 0 or (j > 0 and (line[j - 1].isalnum() or line[j - 1] == "_")):
            if j < 0:
                out.append(line[i:])
                break
            out.append(line[i:j + 4])
            i = j + 4
            continue
        out.append(line[i:j])
        depth, k = 0, j + 3
        while k < len(line):
            if line[k] == "(":
                depth += 1
            elif line[k] == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        i = k + 1
    return "".join(out).rstrip()


def _normalize_dump(text: str) -> list[str]:
    """A pass dump as comparable lines: no locations, aliases expanded, every SSA value name replaced by %v."""
    aliases: dict[str, str] = {}
    body = []
    for ln in text.splitlines():
        if not ln.strip() or _DIFF_DROP_RE.match(ln):
            continue
        m = _ALIAS_DEF_RE.match(ln)
        if m and not ln.startswith("#loc"):
            aliases[m.group("name")] = m.group("body")
            continue
        body.append(ln)
    for _ in range(3):  # aliases may refer to aliases (dot_op parent = #blocked)
        prev = dict(aliases)
        aliases = {k: _ALIAS_REF_RE.sub(lambda m, a=prev: a.get(m.group(0), m.group(0)), v) for k, v in prev.items()}
    out = []
    for ln in body:
        ln = _strip_locs(ln).strip()
        ln = _ALIAS_REF_RE.sub(lambda m: aliases.get(m.group(0), m.group(0)), ln)
        out.append(_SSA_NAME_RE.sub("%v", ln))
    return out


# A base layout written out (alias definition or inline); its body names no other layout:
#   #ttg.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
_BASE_LAYOUT_RE = re.compile(r"#(?:ttg|ttng)\.(?P<kind>\w+)<\{(?P<body>[^{}#]*)\}>")
# Control flow after SCF lowering (loops no longer exist as ops):  cf.cond_br %12, ^bb1, ^bb2
_CFG_RE = re.compile(r"\bcf\.(?:cond_)?br\b")


def _structure(lines: list[str]) -> tuple[tuple, tuple]:
    """(loop signature, layout signature) of one normalized dump."""
    loops = []
    cvt = alloc = 0
    layouts = set()
    for ln in lines:
        if _LOOP_HEAD_RE.search(ln):
            loops.append(ln.count(" = %") if "iter_args" in ln else 0)
        for m in _BASE_LAYOUT_RE.finditer(ln):
            if m.group("kind") != "shared_memory":
                layouts.add((m.group("kind"), m.group("body")))
        cvt += "ttg.convert_layout" in ln
        alloc += "ttg.local_alloc" in ln
    return tuple(loops), (tuple(sorted(layouts)), cvt, alloc)


def pass_changes(k: KernelIR) -> list[tuple[str, int]]:
    """(pass name, changed lines) for every pass in the dump, in order.

    The changes of a pass are the lines that differ (difflib; a replaced line counts once; for dumps over
    3000 lines, the unmatched lines of the two line multisets) between the IR
    dumped before it and the IR dumped before the next pass, both normalized: locations dropped, attribute
    aliases (``#blocked1``) expanded inline and every SSA value name replaced by ``%v``, so that a pass
    that only renames values or prints differently (the pipeliner's internal dumps) counts 0, and a line
    counts as changed when its op, attributes or types change (not when only its operands are rewired). The software pipeliner's internal dumps are attributed to
    their sub-step (``SoftwarePipeliner.LowerLoops`` ...) and the rest of the pipeliner to the enclosing
    pass. The last pass has no dump after it and is not listed.
    """
    cache = k.__dict__.setdefault("_tdx_pass_changes", {})
    if "changes" in cache:
        return cache["changes"]
    ps = k.passes
    out: list[tuple[str, int]] = []
    flags: list[tuple[bool, bool]] = []
    enclosing = None
    prev_lines = _normalize_dump(ps[0].text) if ps else []
    prev_struct = _structure(prev_lines) if ps else None
    for i in range(len(ps) - 1):
        a, b = ps[i], ps[i + 1]
        if not a.name.startswith("SoftwarePipeliner."):
            enclosing = a.name
        if b.name.startswith("SoftwarePipeliner."):
            name = b.name
        elif a.name.startswith("SoftwarePipeliner."):
            name = enclosing or a.name
        else:
            name = a.name
        cur_lines = _normalize_dump(b.text)
        if cur_lines == prev_lines:
            changed = 0
        elif max(len(prev_lines), len(cur_lines)) <= 3000:
            sm = difflib.SequenceMatcher(None, prev_lines, cur_lines, autojunk=False)
            changed = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal")
        else:  # LLVM-dialect dumps run to tens of thousands of lines: count unmatched lines instead
            ca, cb = Counter(prev_lines), Counter(cur_lines)
            changed = max(sum((ca - cb).values()), sum((cb - ca).values()))
        struct = _structure(cur_lines)
        lowered = "llvm.func" in b.text or bool(_CFG_RE.search(b.text))  # below TTGIR: no loops/layouts to compare
        flags.append((not lowered and struct[0] != prev_struct[0], not lowered and struct[1] != prev_struct[1]))
        out.append((name, changed))
        prev_lines, prev_struct = cur_lines, struct
    cache["changes"], cache["flags"] = out, flags
    return out


def pass_structure_changes(k: KernelIR) -> tuple[list[str], list[str]]:
    """(passes that changed the loop structure, passes that changed layouts), TTGIR-level passes only."""
    changes = pass_changes(k)
    flags = k.__dict__["_tdx_pass_changes"]["flags"]
    loops = list(dict.fromkeys(n for (n, c), (lp, _) in zip(changes, flags) if lp and c))
    lays = list(dict.fromkeys(n for (n, c), (_, ly) in zip(changes, flags) if ly and c))
    return loops, lays


@detector("pass_summary", "compiler", ("passes",), (),
          "per-pass summary: which passes changed the IR (changed lines per pass) and which changed the loop "
          "structure or the layouts")
def _pass_summary(det: Detector, k: KernelIR) -> list[Finding]:
    """`pass_changes(k)` diffs consecutive per-pass dumps (normalized: no locations, aliases expanded, SSA
    names erased) and counts changed lines per pass. The finding (info) names the TTGIR-level passes
    that changed the loop structure (scf.for/while headers and their iter_args) or the layouts (the set
    of layouts written out, convert_layout and local_alloc counts). Silent when no pass changed either."""
    changes = pass_changes(k)
    if not changes:
        return []
    loops, lays = pass_structure_changes(k)
    if not loops and not lays:
        return []
    per_pass = Counter()
    for n, c in changes:
        per_pass[n] += c
    top = ", ".join(f"{n} ({c})" for n, c in per_pass.most_common(5) if c)
    msg = []
    if loops:
        msg.append("loop structure changed by " + ", ".join(loops))
    if lays:
        msg.append("layouts changed by " + ", ".join(lays))
    return [det.finding(k, "; ".join(msg) + f". Most changed lines: {top}", None, stage="passes", severity="info",
                        passes=len(changes), changed_passes=sum(1 for _, c in changes if c),
                        loop_passes=",".join(loops), layout_passes=",".join(lays))]
