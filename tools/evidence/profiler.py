"""Tier 1 evidence from measurements: roofline position and what limits the kernel."""

from __future__ import annotations

from typing import Any

from tritondx.tools.records.evidence import Finding, finding_id
from tritondx.tools.evidence.work import WorkFigures, shape_key


def roofline_findings(bench: dict[str, Any], variant: str = "initial",
                      work: dict[str, WorkFigures] | None = None) -> list[Finding]:
    """Findings about one variant from a bench result (one per timed shape).

    ``work`` (per shape, tools/evidence/work.py) replaces the bench job's declared-or-default FLOPs and bytes with
    the figures counted from the kernel (IR, ncu) where the task declares none; each finding says
    where its figures came from."""
    out: list[Finding] = []
    ceilings = bench["ceilings"]
    bw = ceilings["copy_bytes_per_s"]
    for entry in bench["shapes"]:
        v = entry["variants"].get(variant)
        if not v:
            continue
        t = v["median_ms"] * 1e-3
        shape = entry["shape"]
        w = (work or {}).get(shape_key(shape)) or WorkFigures(flops=int(entry.get("flops") or 0),
                                                                bytes=int(entry.get("bytes") or 0),
                                                                flops_source="bench job", bytes_source="bench job")
        nbytes, flops = w.bytes, w.flops
        rate = ceilings["matmul_flops_per_s"]["bf16" if "16" in entry["dtype"] else "tf32"]
        mem_t, math_t = nbytes / bw, (flops / rate if flops else 0.0)
        frac = max(mem_t, math_t) / t if t > 0 else 0.0
        bound = "memory" if mem_t >= math_t else "compute"
        metric = {"median_ms": round(v["median_ms"], 5), "spread": round(v["spread"], 4),
                  "roofline_fraction": round(frac, 4), "bound": bound, "shape": str(shape),
                  "achieved_GBps": round(nbytes / t / 1e9, 1), "floor_ms": round(max(mem_t, math_t) * 1e3, 5),
                  "flops": flops, "flops_source": w.flops_source, "bytes": nbytes, "bytes_source": w.bytes_source}
        if w.ncu_dram_bytes:
            metric["ncu_dram_bytes"] = w.ncu_dram_bytes
        if flops:
            metric["achieved_TFLOPs"] = round(flops / t / 1e12, 2)
        src = f"; FLOPs {w.flops_source}, bytes {w.bytes_source}"
        if bound == "memory":
            msg = (f"memory-bound at {frac:.0%} of the measured copy bandwidth "
                   f"({nbytes / t / 1e9:.0f} of {bw / 1e9:.0f} GB/s) at shape {shape}{src}")
            suggests = ["fuse_passes", "fuse_launches", "launch_config", "alignment_hints"]
        else:
            msg = (f"compute-bound at {frac:.0%} of the measured matmul rate "
                   f"({flops / t / 1e12:.1f} of {rate / 1e12:.0f} TFLOP/s) at shape {shape}{src}")
            suggests = ["tl_dot", "launch_config", "pipelining", "grouped_ordering", "split_k"]
        sev = "high" if frac < 0.3 else "medium" if frac < 0.7 else "low"
        out.append(Finding(id=finding_id("roofline", variant, None) + f":{shape}", detector="roofline",
                           tier="profile", stage="timing", severity=sev, message=msg, metric=metric,
                           suggests=suggests if frac < 0.8 else []))
        if v["median_ms"] < 0.02:
            out.append(Finding(id=finding_id("launch_overhead", variant, None) + f":{shape}",
                               detector="launch_overhead", tier="profile", stage="timing", severity="medium",
                               message=f"kernel time {v['median_ms'] * 1e3:.1f} us is close to launch overhead "
                                       "(a few us per launch)", metric=metric,
                               suggests=["fuse_launches", "persistent"]))
    return out
