"""The step of ``bench/capture/step.py`` before and after ``tritondx apply``, side by side in one process.

``alias SRC DEST NAME``: copy the Liger package at SRC (the patched copy ``tritondx apply --commit`` wrote
into) to ``DEST/NAME`` with its own imports renamed, so the original (``liger_kernel``, installed) and the
patched library (``NAME``) load together in one process.

``run``: one model, one batch, two op sets (``--before`` package, ``--after`` package):

- outputs compared: the loss and every parameter gradient of one step, after against before (relative L2
  error and largest absolute difference), and both against the PyTorch reference ops (``--impl torch``): the
  patched step passes when its error against the reference is within the original's (x1.5, or the dtype's
  tolerance);
- step time: warm-up, then ``--rounds`` rounds of ``--steps`` steps each, the two variants alternating and
  swapping order every round, CUDA events on a GPU (wall time on a CPU); the medians and their ratio;
- each Triton kernel's own time in the step (torch.profiler, GPU only), before and after: its in-step
  speedup and its share of the step before, and the step speedup Amdahl's law predicts from them, next to
  the measured one; with ``--batch`` the kernel's task-level speedup from ``tritondx batch`` and whether a patch
  was applied, with ``--capture`` its share of the captured Triton time.

Writes ``step_<size>.json`` and ``step_<size>.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import step as S  # noqa: E402


def alias(src: Path, dest: Path, name: str) -> Path:
    """``src`` (a package folder) copied to ``dest/name``, every ``liger_kernel`` import renamed to ``name``."""
    old = src.name
    target = dest / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__", ".git"))
    pat = re.compile(rf"\b{re.escape(old)}\b")
    for p in target.rglob("*.py"):
        text = p.read_text()
        new = pat.sub(name, text)
        if new != text:
            p.write_text(new)
    return target


# ---- one step, its outputs ------------------------------------------------------------------------------------

def outputs(model: S.Model, tokens, target, ops: S.Ops) -> dict[str, torch.Tensor]:
    loss = S.step(model, tokens, target, ops)
    out = {"loss": loss.float().reshape(1)}
    out.update({f"grad.{k}": v.grad.detach().float().clone() for k, v in model.named().items()})
    return out


def compare(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> dict[str, dict]:
    rows = {}
    for k, ref in b.items():
        d = (a[k] - ref)
        rows[k] = {"rel_l2": float(d.norm() / ref.norm().clamp_min(1e-30)), "max_abs": float(d.abs().max())}
    return rows


def worst(rows: dict[str, dict]) -> tuple[str, float]:
    k = max(rows, key=lambda r: rows[r]["rel_l2"])
    return k, rows[k]["rel_l2"]


# ---- timing ----------------------------------------------------------------------------------------------------

def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_steps(model, tokens, target, ops, n: int, device: str) -> float:
    """Milliseconds per step over ``n`` back-to-back steps."""
    _sync(device)
    if device == "cuda":
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(n):
            S.step(model, tokens, target, ops)
        b.record()
        b.synchronize()
        return a.elapsed_time(b) / n
    t0 = time.perf_counter()
    for _ in range(n):
        S.step(model, tokens, target, ops)
    return (time.perf_counter() - t0) * 1e3 / n


def triton_kernel_names(pkg: str) -> set[str]:
    """Names of the Triton kernels in the step's Liger modules (the names the profiler shows)."""
    names = set()
    for mod in ("rms_norm", "swiglu", "rope", "fused_linear_cross_entropy", "cross_entropy", "utils"):
        try:
            m = importlib.import_module(f"{pkg}.ops.{mod}")
        except ImportError:
            continue
        names |= {getattr(v, "fn", v).__name__ for v in vars(m).values()
                  if type(v).__name__ in ("JITFunction", "InterpretedFunction", "Autotuner", "Heuristics")}
    return names


def kernel_times(model, tokens, target, ops, n: int) -> tuple[dict[str, float], float]:
    """GPU milliseconds per step of every kernel (torch.profiler), and of all kernels together."""
    from torch.profiler import ProfilerActivity, profile
    _sync("cuda")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            S.step(model, tokens, target, ops)
        _sync("cuda")
    out: dict[str, float] = {}
    for e in prof.key_averages():
        us = 0.0   # self time: a kernel's own, never its parent op's total (no double counting)
        for attr in ("self_device_time_total", "self_cuda_time_total", "device_time_total", "cuda_time_total"):
            if getattr(e, attr, None) is not None:
                us = getattr(e, attr)
                break
        if us:
            out[e.key] = out.get(e.key, 0.0) + us / 1e3 / n
    # the profiler's own rows (e.g. "ProfilerStep") are not kernels; memcpy/memset rows are device work
    return out, sum(out.values())


def amdahl(kernels: list[dict]) -> float | None:
    """The step speedup the kernels' own in-step speedups predict from their shares of the step (Amdahl)."""
    timed = [k for k in kernels if k.get("speedup_in_step") and k.get("share_of_step_before")]
    if not timed:
        return None
    rest = 1.0 - sum(k["share_of_step_before"] for k in timed)
    return 1.0 / (rest + sum(k["share_of_step_before"] / k["speedup_in_step"] for k in timed))


# ---- the run ------------------------------------------------------------------------------------------------------

def tasks_by_kernel(batch: Path | None, capture: Path | None) -> dict[str, dict]:
    """Per captured kernel: its share of the captured Triton time, its task's batch result, its patch."""
    out: dict[str, dict] = {}
    cap = json.loads(capture.read_text()) if capture and capture.exists() else {}
    for k in cap.get("kernels", []):
        out[k["kernel"]] = {"captured_share": k["share"], "captured_launches": k["launches"], "task": None}
    for t in cap.get("tasks", []):
        out.setdefault(t["kernel"], {})["task"] = Path(t["task"]).stem
    res = {}
    if batch and (batch / "results.json").exists():
        res = {r["task"]: r for r in json.loads((batch / "results.json").read_text()).get("results", [])}
    for name, row in out.items():
        r = res.get(row.get("task") or "")
        if r:
            row.update(batch_status=r.get("status"), task_speedup=r.get("speedup"),
                       rewrites=r.get("rewrites_applied"))
            row["patched"] = bool(batch and (batch / "runs" / row["task"] / "apply.patch").exists())
    return out


def run(args) -> dict:
    if args.after_path:
        sys.path.insert(0, str(Path(args.after_path).resolve()))
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    size = S.SIZES[args.size]
    before = S.make_ops(args.impl, args.before, device)
    after = S.make_ops(args.impl, args.after, device)
    ref = S.make_ops("torch", args.before, device)
    model = S.Model(size, args.layers, device, dtype)
    tokens, target = S.batch(size, device)
    print(f"bench_step: size {args.size} on {device}; before: {before.describe()}; after: {after.describe()}",
          flush=True)

    # outputs: one step of each, compared (also warms up and compiles both)
    o_before = outputs(model, tokens, target, before)
    o_after = outputs(model, tokens, target, after)
    o_ref = outputs(model, tokens, target, ref)
    after_vs_before = compare(o_after, o_before)
    before_vs_ref, after_vs_ref = compare(o_before, o_ref), compare(o_after, o_ref)
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-4
    wb, eb = worst(before_vs_ref)
    wa, ea = worst(after_vs_ref)
    # per output: the patched step's error against PyTorch within 1.5x the original's, or the dtype's tolerance
    over = {k: r["rel_l2"] for k, r in after_vs_ref.items()
            if r["rel_l2"] > max(1.5 * before_vs_ref[k]["rel_l2"], tol)}
    outputs_ok = not over
    bound = tol
    wab, eab = worst(after_vs_before)
    print(f"  outputs: after vs before worst rel L2 {eab:.2e} ({wab}); vs torch reference: before {eb:.2e} "
          f"({wb}), after {ea:.2e} ({wa}); " + ("match" if outputs_ok else f"MISMATCH: {', '.join(sorted(over))}"),
          flush=True)

    # step time, interleaved
    for ops in (before, after):
        time_steps(model, tokens, target, ops, args.warmup, device)
    t_before, t_after = [], []
    for r in range(args.rounds):
        order = [(before, t_before), (after, t_after)]
        for ops, acc in (order if r % 2 == 0 else order[::-1]):
            acc.append(time_steps(model, tokens, target, ops, args.steps, device))
    mb, ma = statistics.median(t_before), statistics.median(t_after)
    print(f"  step time (median of {args.rounds} rounds x {args.steps} steps): before {mb:.3f} ms, after {ma:.3f} ms, "
          f"speedup {mb / ma:.3f}x", flush=True)

    # each Triton kernel's own time in the step (GPU only)
    kernels = []
    info = tasks_by_kernel(Path(args.batch) if args.batch else None, Path(args.capture) if args.capture else None)
    predicted, profile_error = None, None
    if device == "cuda":
        names = triton_kernel_names(args.before) | set(info)
        try:
            kb, gpu_b = kernel_times(model, tokens, target, before, args.profile_steps)
            ka, gpu_a = kernel_times(model, tokens, target, after, args.profile_steps)
        except Exception as exc:   # no CUPTI, say: the step times above still stand
            profile_error = f"{type(exc).__name__}: {exc}"[:300]
            print(f"  per-kernel times: the profiler failed: {profile_error}", flush=True)
            kb, ka, gpu_b, gpu_a = {}, {}, None, None
        for name in sorted(names, key=lambda n: -kb.get(n, 0.0)):
            if name not in kb and name not in info:
                continue
            b, a = kb.get(name), ka.get(name)
            kernels.append({"kernel": name, "ms_before": b, "ms_after": a,
                            "speedup_in_step": (b / a) if b and a else None,
                            "share_of_step_before": (b / mb) if b else None, **info.get(name, {})})
        predicted = amdahl(kernels)
        gpu_busy = {"before_ms": gpu_b, "after_ms": gpu_a}
    else:
        kernels = [{"kernel": n, **v} for n, v in info.items()]
        gpu_busy = None
    doc = {
        "what": "bench/capture/step.py (Llama-style block from Liger-Kernel's Triton kernels), forward + backward, "
                "before and after `tritondx apply`, side by side in one process",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"), "size": args.size, "dims": size, "layers": args.layers,
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "dtype": str(dtype),
        "versions": {"torch": torch.__version__, "triton": _version("triton"),
                     "liger_kernel": _version("liger_kernel")},
        "before": before.impl, "after": after.impl,
        "outputs": {"match": outputs_ok, "tolerance_rel_l2": bound, "over": over,
                    "rule": "each output's relative L2 error against the PyTorch reference within 1.5x the "
                            "original library's, or the tolerance",
                    "after_vs_before_worst": [wab, eab],
                    "before_vs_torch_worst": [wb, eb], "after_vs_torch_worst": [wa, ea],
                    "after_vs_before": after_vs_before, "loss_before": float(o_before["loss"]),
                    "loss_after": float(o_after["loss"]), "loss_torch": float(o_ref["loss"])},
        "step_ms": {"before": mb, "after": ma, "speedup": mb / ma, "rounds_before": t_before, "rounds_after": t_after,
                    "steps_per_round": args.steps, "timing": "CUDA events" if device == "cuda" else "wall clock"},
        "gpu_busy_ms_per_step": gpu_busy,
        "kernels": kernels, "amdahl_predicted_speedup": predicted, "profile_error": profile_error,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"step_{args.size}.json").write_text(json.dumps(doc, indent=1))
    (out / f"step_{args.size}.md").write_text(markdown(doc))
    print(f"  wrote {out / f'step_{args.size}.json'} and .md", flush=True)
    return doc


def _version(mod: str) -> str:
    from importlib import metadata
    for dist in (mod, mod.replace("_", "-")):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "-"


def _f(v, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def markdown(doc: dict) -> str:
    s, o = doc["step_ms"], doc["outputs"]
    d = doc["dims"]
    lines = [f"# Step before and after `tritondx apply` ({doc['size']}, {doc['device']}, {doc['date']})", "",
             f"{doc['what']}. {doc['layers']} block(s); hidden {d['hidden']}, {d['heads']}/{d['kv_heads']} heads of "
             f"{d['head_dim']}, MLP {d['mlp']}, vocabulary {d['vocab']}, batch {d['batch']} x {d['seq']} tokens, "
             f"{doc['dtype'].replace('torch.', '')}. Versions: "
             + ", ".join(f"{k} {v}" for k, v in doc["versions"].items()) + ".", "",
             "| | before | after | speedup |", "|---|---|---|---|",
             f"| step time ({s['timing']}, median of {len(s['rounds_before'])} rounds x {s['steps_per_round']} steps) "
             f"| {s['before']:.3f} ms | {s['after']:.3f} ms | **{s['speedup']:.3f}x** |", ""]
    if doc.get("amdahl_predicted_speedup"):
        lines += [f"Amdahl's law from the kernels' own in-step speedups and shares predicts "
                  f"{doc['amdahl_predicted_speedup']:.3f}x.", ""]
    lines += [f"Outputs (loss and every parameter gradient of one step): {'match' if o['match'] else '**MISMATCH**'}; "
              f"after vs before worst relative L2 error {o['after_vs_before_worst'][1]:.2e} "
              f"({o['after_vs_before_worst'][0]}); against the PyTorch reference: before "
              f"{o['before_vs_torch_worst'][1]:.2e}, "
              f"after {o['after_vs_torch_worst'][1]:.2e} (rule: {o['rule']} {o['tolerance_rel_l2']:.0e}"
              + (f"; over it: {', '.join(sorted(o['over']))}" if o["over"] else "") + "). Loss before "
              f"{o['loss_before']:.5f}, after {o['loss_after']:.5f}, PyTorch {o['loss_torch']:.5f}.", ""]
    if doc["kernels"]:
        lines += ["| kernel | share of step (before) | in step before (ms) | after (ms) | own speedup in step | "
                  "task speedup (batch) | patched | share of captured Triton time |",
                  "|---|---|---|---|---|---|---|---|"]
        for k in doc["kernels"]:
            lines.append(f"| {k['kernel']} | {_f(k.get('share_of_step_before'), '.1%')} "
                         f"| {_f(k.get('ms_before'), '.3f')} "
                         f"| {_f(k.get('ms_after'), '.3f')} | {_f(k.get('speedup_in_step'), '.2f')} "
                         f"| {_f(k.get('task_speedup'), '.2f')} | {'yes' if k.get('patched') else 'no'} "
                         f"| {_f(k.get('captured_share'), '.1%')} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("alias", help="copy a package under another name, its imports renamed")
    a.add_argument("src")
    a.add_argument("dest")
    a.add_argument("name")
    r = sub.add_parser("run", help="time the step before and after, outputs compared")
    r.add_argument("--size", choices=sorted(S.SIZES), default="h200")
    r.add_argument("--layers", type=int, default=1)
    r.add_argument("--impl", choices=["auto", "liger"], default="auto")
    r.add_argument("--before", default="liger_kernel")
    r.add_argument("--after", default="liger_kernel_patched")
    r.add_argument("--after-path", default=None, help="folder holding the --after package")
    r.add_argument("--device", default=None)
    r.add_argument("--warmup", type=int, default=3)
    r.add_argument("--steps", type=int, default=10, help="steps per timed round")
    r.add_argument("--rounds", type=int, default=6)
    r.add_argument("--profile-steps", type=int, default=3)
    r.add_argument("--batch", default=None, help="the `tritondx batch` folder (task speedups, patches)")
    r.add_argument("--capture", default=None, help="the capture's capture.json (captured time shares)")
    r.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "alias":
        print(alias(Path(args.src), Path(args.dest), args.name))
    else:
        run(args)


if __name__ == "__main__":
    main()
