"""Side-by-side GPU timing of a task's variants (runs inside the sandboxed worker, on CUDA).

Method (bench/METHOD.md has the reasoning): every variant is warmed up (compiled, autotuned: an autotuner times its
configs with the device to itself, ``warmup_mode``) first; then for
several rounds the variants are timed in a shuffled order, each round a batch of calls timed
with device events around every call, the L2 flushed (a 256 MB write) before every call, and the
inputs rotated across several buffer sets when one set would fit in L2. A variant's time is the
median over its rounds of the per-round medians; the spread is (max - min) / median of those.
Roofline: the bytes and FLOPs the task must move/do over the device's measured ceilings.

Timed outputs (issue 34): the outputs of the calls that are timed are checked too. In every round the last timed
call of each variant and one call picked at random (``secrets``) are kept and compared with the task's reference on
the same input set (made before any variant ran, at the task's tolerance); a candidate whose timed outputs differ is
named in its entry (``outputs_checked.mismatch``) and rejected by the orchestrator (``timing.time_round``:
``timed_output_mismatch``). A launcher that computes less from its 40th call on passes every check the judge makes on
a few calls, and is wrong where it is timed. The initial kernel is checked the same way: where its own timed outputs
differ from the reference (a task whose launcher writes into its inputs, so repeated calls drift), the candidates of
that shape are not held to it and the entry says so.
"""

from __future__ import annotations

import json
import math
import random
import secrets
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch

from tritondx.tools.exec.gpulock import aside, autotune_exclusive, phase
from tritondx.tools.verify.judge.compare import compare as _compare, sensitivity as _sensitivity
from tritondx.tools.verify.runner.guard import TimingSnapshot
from tritondx.tools.exec.rejected import Rejected
from tritondx.tools.task.module import (as_tuple, bitwise_equal, load_module, norm_shape, roofline_counts,
                                        tensor_bytes, to_dtype, tolerance)

# Captured before any candidate is imported: candidates cannot swap the clock under us.
_Event = torch.cuda.Event
_elapsed = torch.cuda.Event.elapsed_time
_record = torch.cuda.Event.record
_synchronize = torch.cuda.synchronize
_perf = time.perf_counter
_sleep = getattr(torch.cuda, "_sleep", None)

L2_FLUSH_BYTES = 256 * 1024 * 1024
ROUND_TARGET_MS = 25.0


class Timer:
    """Per-call device events around ``fn``, the L2 flushed before each call.

    ``pad_host``: a spin kernel (``torch.cuda._sleep``) after the flush keeps the device busy for 1.5x the longest
    host time a call has taken so far (+10 us, at most 2 ms), so the events time the kernels and not the gaps while
    the host enqueues them. Whose host time sets the pad: ``pad_from`` (a function the timer has timed: every
    variant gets the pad of that one, the bench's initial kernel), else each ``fn`` its own (the tuner: its
    configurations share one launcher). With the initial kernel's launcher setting every variant's pad, a variant
    whose own host work per call is longer than the initial's has that excess timed (a launcher that computes on
    the host gains nothing from the pad), and one that is shorter gets no credit for it.

    Why the bench pads (2026-12-05): on a host loaded by a batch's 8 tasks a launcher's host time far exceeds the
    flush's ~70 us, and unpadded events timed the host, not the kernel: H200 corpus batch of 2026-12-05
    (``corpus_h200_20261205/batch_a``), the tuner's padded timer and the final bench's unpadded one on the same
    initial kernels: unsloth_rms_layernorm 22.0 vs 102.7 us, vmamba_chunk_cumsum_fwd 12.9 vs 75.0 us,
    slora_int8_perrow_quant 21.2 vs 71.8 us (where the tuner's 1.13x winner was lost in the host's time),
    triton_matmul_fp16 46.0 vs 63.7 us (its 1.33x winner measured 1.07x). On a quiet host, where a launcher's host
    time stays under the flush, both time the same thing. Each variant's host time per call is still reported
    (``host_us_per_call``; bench/METHOD.md)."""

    def __init__(self, device: str = "cuda", pad_host: bool = False) -> None:
        self.flush_buf = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device)
        self.pad_host = pad_host and _sleep is not None and not str(device).startswith("cpu")
        self._host_max: dict[int, float] = {}
        self._cycles_per_s: float | None = None
        #: the function whose longest host time sets every call's pad (None: each function its own)
        self.pad_from: Callable[[], Any] | None = None

    def _cycles(self) -> float:
        """Spin-kernel cycles per second on this device (one measurement of a 1M-cycle spin)."""
        if self._cycles_per_s is None:
            s, e = _Event(enable_timing=True), _Event(enable_timing=True)
            _sleep(1000)
            _record(s)
            _sleep(1_000_000)
            _record(e)
            _synchronize()
            self._cycles_per_s = 1_000_000 / max(_elapsed(s, e) * 1e-3, 1e-6)
        return self._cycles_per_s

    def pad_s(self, fn: Callable[[], Any]) -> float:
        """The pad before a call of ``fn`` (seconds; 0 without ``pad_host``)."""
        if not self.pad_host:
            return 0.0
        seen = self._host_max.get(id(self.pad_from if self.pad_from is not None else fn), 0.0)
        return min(1.5 * seen + 10e-6, 2e-3) if seen > 0 else 0.0

    def calls(self, fn: Callable[[], Any], n: int) -> list[float]:
        """Device time of ``n`` calls, each after an L2 flush. ``self.host_s``: host seconds spent
        inside the calls (launch overhead); while it stays under the flush's device time (~70 us
        on an H200, plus the pad with ``pad_host``) the device never waits for the host, so the events time the
        kernels alone."""
        starts = [_Event(enable_timing=True) for _ in range(n)]
        ends = [_Event(enable_timing=True) for _ in range(n)]
        host = 0.0
        rate = self._cycles() if self.pad_host else 0.0
        for i in range(n):
            self.flush_buf.zero_()
            pad = self.pad_s(fn)
            if pad > 0:
                _sleep(int(pad * rate))
            _record(starts[i])
            t0 = _perf()
            fn()
            dt = _perf() - t0
            host += dt
            self._host_max[id(fn)] = max(self._host_max.get(id(fn), 0.0), dt)
            _record(ends[i])
        self.host_s = host / max(n, 1)
        _synchronize()
        return [_elapsed(s, e) for s, e in zip(starts, ends)]


def measure_ceilings(job: dict[str, Any]) -> dict[str, Any]:
    """Device copy bandwidth and matmul rates, measured once per device and cached in a file."""
    cache = Path(job["cache_file"])
    name = torch.cuda.get_device_name()
    if cache.exists():
        data = json.loads(cache.read_text())
        if data.get("device") == name:
            return data
    with phase("exclusive"):
        return _measure_ceilings(cache, name)


def _measure_ceilings(cache: Path, name: str) -> dict[str, Any]:
    timer = Timer()
    n = 1 << 28  # 1 GiB of fp32
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    t = statistics.median(timer.calls(lambda: dst.copy_(src), 20))
    bw = 2 * n * 4 / (t * 1e-3)
    del src, dst
    rates = {}
    for label, dtype, tf32 in (("bf16", torch.bfloat16, False), ("tf32", torch.float32, True),
                               ("fp32", torch.float32, False)):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        m = 8192 if label != "fp32" else 4096
        a = torch.randn(m, m, device="cuda").to(dtype)
        b = torch.randn(m, m, device="cuda").to(dtype)
        for _ in range(3):
            a @ b
        t = statistics.median(timer.calls(lambda: a @ b, 10))
        rates[label] = 2 * m ** 3 / (t * 1e-3)
    torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    data = {
        "device": name, "copy_bytes_per_s": bw, "matmul_flops_per_s": rates,
        "sm_count": props.multi_processor_count, "l2_bytes": getattr(props, "L2_cache_size", 0),
        "torch": torch.__version__, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(data, indent=1))
    return data


def floor_seconds(nbytes: int, flops: int, dtype: torch.dtype, ceilings: dict[str, Any]) -> float:
    rates = ceilings["matmul_flops_per_s"]
    rate = rates["bf16"] if dtype in (torch.float16, torch.bfloat16, torch.int8) else rates["tf32"]
    return max(nbytes / ceilings["copy_bytes_per_s"], flops / rate if flops else 0.0)


#: torch.compile's compile workers in a bench job that times the torch baselines. That job runs beside the
#: task's optimize run (batch.BaselinesJob) and beside the other tasks of the batch, so its compile keeps to
#: one core instead of a pool of ``cpu_count`` workers (each a Python start importing torch) competing with
#: the runs for the host's cores. It changes how fast inductor compiles, not what it generates.
BASELINE_COMPILE_THREADS = 1


def _quiet_compile() -> None:
    try:
        import torch._inductor.config as inductor_config
        inductor_config.compile_threads = BASELINE_COMPILE_THREADS
    except Exception:  # another torch: its default
        pass


def _compile_imports() -> float:
    """torch.compile's imports (dynamo, inductor) and settings, taken before the warm-up's device hold: on the H100
    host they took ~6 s of a baselines job's ~8.5 s shared hold (``bench/scripts/baselines_warmup.py``,
    2026-12-05: matmulfree_l2norm's warm-up held 8.5 s for 2.5 s of inputs, calls and compile), while every timer
    of the batch waited behind the hold. Returns the seconds they took."""
    t0 = time.monotonic()
    _quiet_compile()
    try:
        import torch._dynamo  # noqa: F401
        from torch._inductor import compile_fx  # noqa: F401
    except Exception:  # another torch: the first torch.compile call imports what it needs
        pass
    return round(time.monotonic() - t0, 3)


def _inductor_aside(marks: dict | None = None):
    """torch.compile's default backend (inductor) with its compile run outside the device hold (``gpulock.aside``):
    tracing's graph goes through lowering, code generation and Triton compiles, all on the CPU, for seconds to
    minutes on a loaded host, and a shared hold through them made every timer of the batch wait. The compiled
    graph runs (and inductor's autotuning launches) under the hold as before. ``marks["compile_aside_s"]``: the
    seconds its compiles took."""
    from torch._inductor.compile_fx import compile_fx

    def inductor(gm, example_inputs):
        t0 = time.monotonic()
        try:
            with aside():
                return compile_fx(gm, example_inputs)
        finally:
            if marks is not None:
                marks["compile_aside_s"] = round(marks.get("compile_aside_s", 0.0) + time.monotonic() - t0, 3)
    return inductor


class TimedOutputs:
    """The outputs of the timed calls (module docstring): per variant, its last call's and one random call's
    (set index, outputs), and the reference of every input set, made before any variant ran."""

    def __init__(self, orig, sets: list, dtype) -> None:
        self.orig, self.sets, self.dtype = orig, sets, dtype
        self.refs = [as_tuple(orig.reference(*[t.clone() if isinstance(t, torch.Tensor) else t for t in s]))
                     for s in sets]
        self.last: dict[str, tuple[int, Any]] = {}
        self.picked: dict[str, tuple[int, Any]] = {}
        self.pick_at: dict[str, int] = {}
        self.checked: dict[str, int] = {}
        self.mismatch: dict[str, str] = {}

    def keep(self, vid: str, call: int, j: int, out: Any) -> None:
        if vid not in self.pick_at:   # a warm-up or estimate call: nothing kept (no output held between batches)
            return
        self.last[vid] = (j, out)
        if self.pick_at[vid] == call:
            self.picked[vid] = (j, out)

    def arm(self, vid: str, first_call: int, n: int) -> None:
        """The next ``n`` calls of ``vid`` are timed from call number ``first_call``: pick one of them at random."""
        self.pick_at[vid] = first_call + secrets.randbelow(max(n, 1))
        self.picked.pop(vid, None)
        self.last.pop(vid, None)

    def check(self, vid: str, where: str) -> None:
        """Compare the kept outputs of ``vid``'s last timed batch with the reference; the first mismatch is kept."""
        for what, kept in (("last timed call", self.last.get(vid)), ("a random timed call", self.picked.get(vid))):
            if kept is None or vid in self.mismatch:
                continue
            j, out = kept
            bad = self._differs(out, j)
            self.checked[vid] = self.checked.get(vid, 0) + 1
            if bad:
                self.mismatch[vid] = f"{where}, {what} (input set {j}): {bad}"
        self.last.pop(vid, None)
        self.picked.pop(vid, None)
        self.pick_at.pop(vid, None)

    def _differs(self, out: Any, j: int) -> str | None:
        outs, refs = as_tuple(out), self.refs[j]
        if len(outs) != len(refs):
            return f"{len(outs)} outputs, reference {len(refs)}"
        for i, (o, r) in enumerate(zip(outs, refs)):
            if not isinstance(r, torch.Tensor):
                continue
            if not isinstance(o, torch.Tensor):
                return f"output {i} is {type(o).__name__}, not a tensor"
            atol, rtol = tolerance(self.orig, self.dtype, output=i)
            bad = _compare(o, r, atol, rtol)
            if bad and r.is_floating_point():   # the reference's own rounding sensitivity, as the judge allows
                try:
                    floor = _sensitivity(self.orig.reference, list(self.sets[j]), refs, 0x34)[i]
                except Exception:  # noqa: BLE001 - the user's reference: the plain comparison stands
                    floor = None
                if floor is not None:
                    bad = _compare(o, r, atol, rtol, floor=floor)
            if bad:
                return f"output {i}: {bad['reason']}"
        return None


def _prepare_shape(orig, mods, variants, shape, dtype, ceilings, l2, timer, job, marks: dict | None = None):
    """Inputs (rotated sets when one set fits in L2), roofline counts, the callables to time (each keeps its outputs
    for ``TimedOutputs``), the reference of every set, warmed up. ``marks``: the seconds of each step (inputs,
    references, each callable's first call and its next two), what the warm-up's device hold went to."""
    marks = {} if marks is None else marks
    t0 = time.monotonic()
    device = job.get("device", "cuda")
    first = as_tuple(orig.make_inputs(shape, dtype, 1, device))
    in_bytes = tensor_bytes(first)
    n_sets = 1 if in_bytes >= 3 * l2 else min(8, math.ceil(3 * l2 / max(in_bytes, 1)))
    sets = [first] + [as_tuple(orig.make_inputs(shape, dtype, 2 + i, device)) for i in range(n_sets - 1)]
    kept = [t.clone() if isinstance(t, torch.Tensor) else None for t in first]
    outs = as_tuple(orig.reference(*first))
    # a reference that writes into its inputs: which ones (put back, so every variant starts from the same inputs);
    # the torch baselines copy them in each timed call, as launch() must leave its inputs unchanged
    written = [i for i, (t, k) in enumerate(zip(first, kept)) if k is not None and not bitwise_equal(t, k)]
    for i in written:
        first[i].copy_(kept[i])
    del kept
    marks["reference_writes_inputs"] = written
    nbytes, flops = roofline_counts(orig, shape, dtype, first, outs)
    del outs
    floor_s = floor_seconds(nbytes, flops, dtype, ceilings)
    marks["inputs_s"] = round(time.monotonic() - t0, 3)
    t0 = time.monotonic()
    timed = TimedOutputs(orig, sets, dtype)   # before any variant runs on the sets
    marks["references_s"] = round(time.monotonic() - t0, 3)
    fns: dict[str, Callable[[], Any]] = {}
    counters = {v["id"]: 0 for v in variants}
    for v in variants:
        launch = mods[v["id"]].launch

        def fn(_launch=launch, _vid=v["id"]):
            counters[_vid] += 1
            j = counters[_vid] % n_sets
            out = _launch(*sets[j])
            timed.keep(_vid, counters[_vid], j, out)
            return out

        fns[v["id"]] = fn
    extra = {}
    if job.get("baselines") and not getattr(orig, "ORACLE", None):
        # (a captured task's reference is the original kernel itself, not a PyTorch baseline)
        ref = orig.reference
        if written:   # torch under launch()'s contract: the inputs it writes are copies (inside compiled graphs too)
            def ref(*args, _ref=orig.reference, _w=frozenset(written)):
                return _ref(*[a.clone() if i in _w else a for i, a in enumerate(args)])
        extra["torch_eager"] = lambda: ref(*sets[0])
        _quiet_compile()
        t1 = time.monotonic()
        try:
            compiled = torch.compile(ref, backend=_inductor_aside(marks))
            marks["compile_setup_s"] = round(time.monotonic() - t1, 3)
            extra["torch_compile"] = lambda: compiled(*sets[0])
        except Exception:  # torch.compile may not support the reference
            pass
    all_fns = {**fns, **extra}
    errors: dict[str, str] = {}
    for vid, fn in list(all_fns.items()):
        try:
            t0 = time.monotonic()
            fn()
            _synchronize()
            t1 = time.monotonic()
            for _ in range(2):
                fn()
            _synchronize()
            marks[f"first_call_s:{vid}"] = round(t1 - t0, 3)
            marks[f"next_calls_s:{vid}"] = round(time.monotonic() - t1, 3)
        except Exception as exc:  # a baseline that cannot run is reported, not fatal
            errors[vid] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            del all_fns[vid]
    timed.counters = counters
    return sets, n_sets, nbytes, flops, floor_s, all_fns, errors, timed


def warmup_mode(paths: list[str], tuned_alone: bool = False) -> str:
    """The device hold of the warm-up calls. An autotuned launcher's first call benchmarks its configs and keeps the
    fastest for the rest of the job: with other jobs' kernels on the device meanwhile (a shared hold), that pick is
    noise, and every later timing of the job inherits it. Seen on the H200 (corpus batch of 2026-12-03,
    ``cost_h200_20261203e`` call 2): the same autotuned initial kernel (tbg_bnb_quant_global_transpose) timed 0.093 ms
    in its baselines job and 0.192 ms in its final bench.

    ``tuned_alone`` (``gpulock.autotune_exclusive`` took, for the warm-up): Triton's autotuners turn the hold exclusive
    themselves while they time their configs, wherever they are defined (the task, a variant, a library either
    imports), so the warm-up is ``shared``. Without it: ``exclusive`` where a source autotunes (its text,
    ``triton_cache.autotunes``; an autotuner imported from a library is not seen there), else ``shared``. With the
    whole warm-up exclusive (inputs, reference, every variant's calls), a corpus batch of 8 tasks held the device
    exclusively 153-191 s of ~400 s (H200, 2026-12-04, ``cost_h200_20261204``; 92 s before that warm-up was
    exclusive), and every judge waited behind it. Compiles give the device back either way (``gpulock.compile_aside``:
    an exclusive hold steps aside too)."""
    if tuned_alone:
        return "shared"
    from tritondx.tools.exec.triton_cache import autotunes
    return "exclusive" if any(autotunes(p) for p in dict.fromkeys(paths)) else "shared"


# What the timer relies on, captured before any variant is imported: a variant that replaces one of
# them while it runs (to stop the L2 flush, or to bend the clock) fails the whole bench job.
_TIMING = TimingSnapshot()


def _tampered() -> list[str]:
    return _TIMING.tampered()


def bench(job: dict[str, Any]) -> dict[str, Any]:
    ceilings = measure_ceilings({"cache_file": job["ceilings_file"]})
    orig = load_module(job["task"], "orig")
    variants = job["variants"]  # [{"id": "initial", "path": ...}, ...]
    mods = {}
    for v in variants:
        mods[v["id"]] = orig if v["path"] == job["task"] else load_module(v["path"], v["id"])
        if _tampered():
            raise Rejected("timing_tampering", f"variant {v['id']} replaced {', '.join(_tampered())} on import")
    rounds = int(job.get("rounds", 5))
    rng = random.Random(job.get("seed", 0))
    l2 = ceilings.get("l2_bytes") or 50 * 2 ** 20
    # "cpu" only in the control-flow test (tests/cpu/core); the pad: ``Timer``, bench/METHOD.md
    timer = Timer(job.get("device", "cuda"), pad_host=bool(job.get("pad_host", True)))
    results = []
    dtypes = [to_dtype(d) for d in orig.DTYPES][: int(job.get("max_dtypes", 1))]
    paths = [job["task"], *(v["path"] for v in variants)]
    imports_s = _compile_imports() if job.get("baselines") and not getattr(orig, "ORACLE", None) else None
    for dtype in dtypes:
        for shape in [norm_shape(s) for s in orig.BENCH_SHAPES]:
            # inputs, reference and warm-up (compiles, autotuning) touch the device
            with autotune_exclusive(job.get("device", "cuda") != "cpu") as tuned_alone, \
                    phase(warmup_mode(paths, tuned_alone)):
                t_hold = time.monotonic()
                warmup: dict[str, Any] = {"mode": warmup_mode(paths, tuned_alone), "compile_imports_s": imports_s}
                prepared = _prepare_shape(orig, mods, variants, shape, dtype, ceilings, l2, timer, job, warmup)
                warmup["wall_s"] = round(time.monotonic() - t_hold, 3)
            sets, n_sets, nbytes, flops, floor_s, all_fns, errors, timed = prepared
            variant_ids = {v["id"] for v in variants}   # (not the torch baselines)
            with phase("exclusive"):  # nothing else runs on the device while we time
                calls: dict[str, int] = {}
                host_us: dict[str, float] = {}
                # the initial kernel first: its launcher's host time sets every variant's pad (``Timer``)
                timer.pad_from = None
                timer._host_max.clear()   # a function id of an earlier shape's may be reused by this one's
                for vid, fn in sorted(all_fns.items(), key=lambda kv: kv[0] != "initial"):
                    try:
                        est = statistics.median(timer.calls(fn, 5))
                        if vid == "initial":
                            timer.pad_from = fn
                        host_us[vid] = timer.host_s * 1e6
                    except Exception as exc:  # a baseline that cannot run is reported, not fatal
                        errors[vid] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                        del all_fns[vid]
                        continue
                    calls[vid] = max(5, min(200, int(ROUND_TARGET_MS / max(est, 1e-3))))
                per_round: dict[str, list[float]] = {vid: [] for vid in all_fns}
                for _ in range(rounds):
                    order = list(all_fns)
                    rng.shuffle(order)
                    for vid in order:
                        if vid in variant_ids:
                            timed.arm(vid, timed.counters[vid] + 1, calls[vid])
                        per_round[vid].append(statistics.median(timer.calls(all_fns[vid], calls[vid])))
                        tampered = _tampered()
                        if tampered:
                            raise Rejected("timing_tampering", f"variant {vid} replaced {', '.join(tampered)} "
                                                               "while it was timed")
                        if vid in variant_ids:   # after the batch's last event: the comparison is not timed
                            timed.check(vid, f"round {len(per_round[vid])}")
            entry = {"shape": list(shape) if isinstance(shape, tuple) else shape, "dtype": str(dtype),
                     "warmup": warmup, "bytes": nbytes, "flops": flops, "floor_ms": floor_s * 1e3, "input_sets": n_sets,
                     "variants": {}, "errors": errors}
            # the timed outputs: held to the reference only where the initial kernel's own timed outputs match it
            baseline_ok = "initial" not in timed.checked or "initial" not in timed.mismatch
            entry["outputs_check"] = (
                "outputs of the timed calls (each round's last call and one random call per variant) compared with "
                "the reference on the same inputs" if baseline_ok else
                f"timed outputs not held to the reference: the initial kernel's own differ "
                f"({timed.mismatch['initial'][:200]})")
            for vid, meds in per_round.items():
                med = statistics.median(meds)
                spread = (max(meds) - min(meds)) / med if med > 0 else 0.0
                entry["variants"][vid] = {
                    "median_ms": med, "round_medians_ms": meds, "spread": spread, "calls_per_round": calls[vid],
                    "host_us_per_call": host_us.get(vid),
                    "pad_us": round(timer.pad_s(all_fns[vid]) * 1e6, 1) if vid in all_fns else None,
                    "roofline_fraction": (floor_s * 1e3) / med if med > 0 else None,
                    "achieved_bytes_per_s": nbytes / (med * 1e-3) if med > 0 else None,
                    "achieved_flops_per_s": flops / (med * 1e-3) if med > 0 and flops else None,
                    "impossible": bool(med < 0.8 * floor_s * 1e3),
                }
                if vid in variant_ids:
                    entry["variants"][vid]["outputs_checked"] = {
                        "calls": timed.checked.get(vid, 0),
                        "mismatch": timed.mismatch.get(vid) if baseline_ok and vid != "initial" else None}
            results.append(entry)
            del sets, prepared, all_fns
            torch.cuda.empty_cache()
    return {"device": torch.cuda.get_device_name(), "ceilings": ceilings, "shapes": results,
            "torch": torch.__version__, "triton": __import__("triton").__version__}
