"""CUDA compiler-tier detectors on the per-pass dumps (``MLIR_ENABLE_DUMP``): what the coalescing, matmul,
layout-conversion and pipelining passes made of the kernel, and whether loads take the async path."""

from __future__ import annotations

import re

from tritondx.tools.ir.context import KernelIR
from tritondx.tools.ir.detectors.common import PTX_CP_ASYNC_RE, PTX_GLOBAL_ACCESS_RE, PTX_TMA_RE, SCF_FOR_RE, func_of
from tritondx.tools.ir.parse import IRLine
from tritondx.tools.ir.registry import Detector, detector
from tritondx.tools.ir.ssa import kernel_func
from tritondx.tools.records.evidence import Finding, Severity


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


@detector("coalesce_layout", "compiler", ("passes",), ("alignment_hints", "launch_config"),
          "the coalescing pass gave each thread a small contiguous chunk", targets=("cuda",))
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
          "what TritonGPUAccelerateMatmul did with each dot", targets=("cuda",))
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
          "the software pipeliner left a loop with global loads unpipelined", targets=("cuda",))
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
          "layout conversions RemoveLayoutConversions could not remove", targets=("cuda",))
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


@detector("async_load_path", "compiler", ("ttgir",), ("pipelining",),
          "how the loads in loops were lowered: TMA (async_tma_copy), cp.async (async_copy_global_to_local) or "
          "plain synchronous tt.load", targets=("cuda",))
def _load_path(det: Detector, k: KernelIR) -> list[Finding]:
    """A compiler fact from the final TTGIR: the global reads inside loops and how they were lowered:
    `ttng.async_tma_copy_global_to_local` (TMA), `ttg.async_copy_global_to_local` (cp.async) or plain
    `tt.load` (synchronous ld.global), with the matching PTX instruction counts (`cp.async.bulk.tensor`,
    `cp.async`, `ld.global`). Info when every loop load is asynchronous, low when plain loads remain."""
    f = func_of(k)
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
