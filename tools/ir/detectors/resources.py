"""CUDA detectors of resources and launch shape: spills, occupancy, grid size, tails, tiny programs, shared
memory per program and launch overhead; and the launch's resource report (not a detector: it always applies)."""

from __future__ import annotations

import re
from collections import Counter

from tritondx.tools.ir.context import KernelIR
from tritondx.tools.ir.detectors.common import MEMDESC_RE, elem_bytes_of, func_of, memory_ops
from tritondx.tools.ir.parse import IRLine
from tritondx.tools.ir.registry import Detector, detector
from tritondx.tools.records.evidence import Finding, finding_id


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


@detector("register_spills", "ir", ("ptx",), ("launch_config",),
          "ptxas spilled registers to local memory", targets=("cuda",))
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
          "few warps resident per SM (from registers, shared memory and warps per program)", targets=("cuda",))
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
          "fewer programs than SMs: part of the chip idles", targets=("cuda",))
def _grid_small(det: Detector, k: KernelIR) -> list[Finding]:
    """Programs in the grid (from the launch) below the SM count (132 on H100 SXM unless the capture
    says otherwise)."""
    sms = k.limits["sm_count"]
    if k.programs >= sms:
        return []
    return [det.finding(k, f"grid has {k.programs} programs for {sms} SMs: {1 - k.programs / sms:.0%} of the SMs idle",
                        None, severity="high" if k.programs < sms / 2 else "medium", programs=k.programs, sms=sms)]


@detector("tail_effect", "ir", ("ttgir",), ("persistent", "launch_config"),
          "the last wave of programs leaves most SMs idle", targets=("cuda",))
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
          "each program handles very little data: launch and scheduling overhead dominate", targets=("cuda",))
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


# Kernel launch in the task's launcher:  axpy_kernel[grid](x, y, out, n, ...)
LAUNCH_CALL_RE = r"\b{name}\s*\["


LAUNCH_OVERHEAD_US = 3.0          # CPU launch + GPU scheduling, per launch (order of magnitude on H100)


HBM_BYTES_PER_US = 3.0e6          # ~3 TB/s


@detector("launch_overhead_dominating", "ir", ("ttgir",), ("fuse_launches", "launch_config"),
          "several launches in one launch() that each move little data: per-launch overhead (~3 us) is comparable "
          "to their run time", scope="capture", targets=("cuda",))
def _launch_overhead(det: Detector, kernels: list[KernelIR]) -> list[Finding]:
    """Looks at every launch one `launch()` made (capture scope). A launch is small when its kernel has
    no loop and the bytes it addresses (tensor loads and stores x programs) take under ~3 us at 3 TB/s,
    i.e. about the cost of the launch itself. Fires with two or more small launches (medium when all
    launches are small); cites the kernel call in the launcher."""
    if len(kernels) < 2:
        return []
    small = []
    for k in kernels:
        f = func_of(k)
        if f is None:
            continue
        has_loop = bool(f.loop_ops())
        moved = 0
        for op in memory_ops(f):
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


# Module attribute set by AllocateSharedMemory (visible in the pass dumps from then on):
#   module attributes {..., "ttg.num-warps" = 4 : i32, ttg.shared = 32768 : i32, ttg.target = "cuda:90", ...}
TTG_SHARED_ATTR_RE = re.compile(r"\bttg\.shared = (?P<bytes>\d+) : i32")


SM90_MAX_SMEM_PER_PROGRAM = 227 * 1024


@detector("shared_memory_occupancy", "ir", ("ttgir",), ("launch_config",),
          "shared memory per program (ttg.shared) against the 228 KB of an sm_90 SM: over the limit, or so large "
          "that only one program fits per SM", targets=("cuda",))
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
    f = func_of(k)
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
