"""npu runtime: untested on hardware.

Running and timing kernels on a real Ascend NPU, and reading what the CANN profilers write. No NPU
was available while this was written: every method that needs one says so in its docstring, and
only the hardware-free parts (availability checks, command building, CSV parsing) are tested.

- Device detection goes through ``torch_npu`` (``import torch_npu`` registers ``torch.npu``);
  the import is guarded, so this module imports anywhere.
- Timing uses triton-ascend's ``triton.testing.do_bench_npu`` (it profiles with
  ``torch_npu.profiler`` and reads the kernel time from ``op_statistic.csv``) when that function
  exists, else ``torch.npu.Event`` pairs around each call.
- Profiling: :meth:`NpuRuntime.msprof_command` / :meth:`NpuRuntime.msprof_op_command` build the
  command lines; :func:`parse_op_summary` reads the ``op_summary_*.csv`` that ``msprof`` writes.

The op-summary format followed here is CANN's "op_summary (Operator Details)" reference of the
Profiling tool user guide (CANN 8.5 commercial edition, ``devaids/profiling/atlasprofiling_16_0067``,
fields Device_id, Task ID, Stream ID, Op Name, OP Type, Task Type, Task Start Time(us),
Task Duration(us), Task Wait Time(us), Block Dim, Mix Block Dim, Input/Output Shapes/Data Types/
Formats, aicore_time(us), aic_* and aiv_* PMU columns such as aiv_time(us), aiv_vec_ratio,
aiv_mte2_ratio, ...), and the msprof command-line reference of the same guide (``msprof --output=DIR
app``; ``msprof op [--output --kernel-name --launch-count --warm-up --aic-metrics] app [args]`` from
the msOpProf tool guide). A sample file in that format is ``tests/cpu/npu/data/op_summary_sample.csv``.
"""

from __future__ import annotations

import csv
import importlib
import math
import statistics
from pathlib import Path
from typing import Any, Callable, Sequence

from pydantic import BaseModel, Field
from tritondx.errors import BackendUnavailable

HARDWARE_NOTE = "npu runtime: untested on hardware"


def _import_torch_npu():
    """``(torch, torch_npu)`` or raise ImportError. ``import torch_npu`` registers ``torch.npu``."""
    torch = importlib.import_module("torch")
    torch_npu = importlib.import_module("torch_npu")
    return torch, torch_npu


class TimingResult(BaseModel):
    """One timed function: milliseconds per call."""

    ms: float
    method: str                      # "do_bench_npu" | "npu_event"
    samples: list[float] = Field(default_factory=list)
    quantiles: dict[str, float] = Field(default_factory=dict)


class OpSummaryRow(BaseModel):
    """One row of an msprof ``op_summary_*.csv`` (the columns tritondx uses, plus everything in ``raw``)."""

    op_name: str
    op_type: str | None = None
    task_type: str | None = None
    task_id: str | None = None
    stream_id: str | None = None
    task_start_us: float | None = None
    task_duration_us: float | None = None
    task_wait_us: float | None = None
    block_dim: int | None = None
    mix_block_dim: int | None = None
    aicore_time_us: float | None = None
    aic_total_cycles: float | None = None
    aiv_time_us: float | None = None
    aiv_total_cycles: float | None = None
    aiv_vec_ratio: float | None = None
    aiv_scalar_ratio: float | None = None
    aiv_mte2_ratio: float | None = None
    aiv_mte3_ratio: float | None = None
    aic_mac_ratio: float | None = None
    aic_mte2_ratio: float | None = None
    raw: dict[str, str] = Field(default_factory=dict)


#: op_summary column -> OpSummaryRow field.
OP_SUMMARY_COLUMNS: dict[str, str] = {
    "Op Name": "op_name", "OP Type": "op_type", "Task Type": "task_type", "Task ID": "task_id",
    "Stream ID": "stream_id", "Task Start Time(us)": "task_start_us", "Task Duration(us)": "task_duration_us",
    "Task Wait Time(us)": "task_wait_us", "Block Dim": "block_dim", "Mix Block Dim": "mix_block_dim",
    "aicore_time(us)": "aicore_time_us", "aic_total_cycles": "aic_total_cycles", "aiv_time(us)": "aiv_time_us",
    "aiv_total_cycles": "aiv_total_cycles", "aiv_vec_ratio": "aiv_vec_ratio",
    "aiv_scalar_ratio": "aiv_scalar_ratio", "aiv_mte2_ratio": "aiv_mte2_ratio",
    "aiv_mte3_ratio": "aiv_mte3_ratio", "aic_mac_ratio": "aic_mac_ratio", "aic_mte2_ratio": "aic_mte2_ratio",
}
_INT_FIELDS = {"block_dim", "mix_block_dim"}
_STR_FIELDS = {"op_name", "op_type", "task_type", "task_id", "stream_id"}


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    t = text.strip().strip("\t")
    if t in ("", "N/A", "NA", "-", "nan"):
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return None if math.isnan(v) else v


def parse_op_summary(path: str | Path) -> list[OpSummaryRow]:
    """Rows of an msprof ``op_summary_*.csv`` (hardware-free). Unknown columns are kept in ``raw``;
    missing ones are None, as the column set depends on ``--aic-metrics`` and the product."""
    rows = []
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or "Op Name" not in [f.strip() for f in reader.fieldnames]:
            raise ValueError(f"{path}: not an msprof op_summary file (no 'Op Name' column)")
        for rec in reader:
            rec = {(k or "").strip(): (v or "").strip() for k, v in rec.items()}
            data: dict[str, Any] = {"raw": rec}
            for col, fieldname in OP_SUMMARY_COLUMNS.items():
                if col not in rec:
                    continue
                if fieldname in _STR_FIELDS:
                    data[fieldname] = rec[col] or None
                else:
                    num = _number(rec[col])
                    data[fieldname] = int(num) if (num is not None and fieldname in _INT_FIELDS) else num
            data["op_name"] = data.get("op_name") or ""
            rows.append(OpSummaryRow(**data))
    return rows


def summarize_op_rows(rows: Sequence[OpSummaryRow], name_contains: str | None = None) -> dict[str, Any]:
    """Per-op aggregate (count, mean/min task duration, mean aiv time, vector ratio) for rows whose
    name contains ``name_contains`` (a Triton kernel shows up under its kernel name)."""
    sel = [r for r in rows if name_contains is None or name_contains in r.op_name]
    durs = [r.task_duration_us for r in sel if r.task_duration_us is not None]
    aiv = [r.aiv_time_us for r in sel if r.aiv_time_us is not None]
    vec = [r.aiv_vec_ratio for r in sel if r.aiv_vec_ratio is not None]
    return {
        "count": len(sel),
        "task_duration_us_mean": statistics.fmean(durs) if durs else None,
        "task_duration_us_min": min(durs) if durs else None,
        "aiv_time_us_mean": statistics.fmean(aiv) if aiv else None,
        "aiv_vec_ratio_mean": statistics.fmean(vec) if vec else None,
        "block_dim": sel[0].block_dim if sel else None,
    }


def find_op_summary(output_dir: str | Path) -> Path | None:
    """The newest ``op_summary_*.csv`` under an msprof output folder (``PROF_*/mindstudio_profiler_output``)."""
    found = sorted(Path(output_dir).rglob("op_summary*.csv"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


class NpuRuntime:
    """Run and time work on one Ascend NPU through ``torch_npu``. npu runtime: untested on hardware."""

    def __init__(self, device_index: int = 0, msprof: str = "msprof"):
        self.device_index = int(device_index)
        self.msprof = msprof

    # -- availability (hardware-free) -----------------------------------------------------------
    @staticmethod
    def torch_npu_importable() -> bool:
        """Whether ``torch_npu`` imports here (no device needed)."""
        try:
            _import_torch_npu()
        except Exception:  # noqa: BLE001 - any import failure means "not here"
            return False
        return True

    def is_available(self) -> bool:
        """True when ``torch_npu`` imports and ``torch.npu.is_available()``; never raises."""
        try:
            torch, _ = _import_torch_npu()
            return bool(torch.npu.is_available()) and torch.npu.device_count() > self.device_index
        except Exception:  # noqa: BLE001
            return False

    def unavailable_reason(self) -> str | None:
        """One line saying why there is no NPU here, or None when there is one."""
        try:
            torch, _ = _import_torch_npu()
        except Exception as exc:  # noqa: BLE001
            return f"torch_npu does not import ({type(exc).__name__}: {exc}); install torch_npu and CANN"
        try:
            if not torch.npu.is_available():
                return "torch_npu imports but torch.npu.is_available() is False (no NPU or driver)"
            if torch.npu.device_count() <= self.device_index:
                return f"no NPU with index {self.device_index} (device_count={torch.npu.device_count()})"
        except Exception as exc:  # noqa: BLE001
            return f"torch.npu query failed: {type(exc).__name__}: {exc}"
        return None

    def require(self) -> None:
        """Raise ``BackendUnavailable`` (one line) unless an NPU is usable."""
        reason = self.unavailable_reason()
        if reason is not None:
            raise BackendUnavailable(f"npu: {reason}")

    @property
    def device(self) -> str:
        """The torch device string, e.g. ``npu:0`` (no hardware needed to build it)."""
        return f"npu:{self.device_index}"

    # -- hardware -------------------------------------------------------------------------------
    def device_info(self) -> dict[str, Any]:
        """Name, memory and core counts of the device. Needs an NPU (and triton-ascend for the core
        counts, read through ``triton.runtime.driver``)."""
        self.require()
        torch, _ = _import_torch_npu()
        info: dict[str, Any] = {"device": self.device, "name": torch.npu.get_device_name(self.device_index)}
        try:
            props = torch.npu.get_device_properties(self.device_index)
            info["total_memory"] = getattr(props, "total_memory", None)
        except Exception:  # noqa: BLE001
            pass
        try:
            from triton.runtime import driver  # triton-ascend

            utils = driver.active.utils
            info.update({"arch": utils.get_arch(), "aicore_num": utils.get_aicore_num(),
                         "vector_core_num": utils.get_aivector_core_num()})
        except Exception:  # noqa: BLE001
            pass
        return info

    def synchronize(self) -> None:
        """``torch.npu.synchronize()``. Needs an NPU."""
        self.require()
        torch, _ = _import_torch_npu()
        torch.npu.synchronize(self.device_index)

    def bench(self, fn: Callable[[], Any], *, warmup: int = 25, rep: int = 100,
              quantiles: Sequence[float] = (0.2, 0.5, 0.8)) -> TimingResult:
        """Milliseconds per call of ``fn``. Needs an NPU.

        Uses triton-ascend's ``triton.testing.do_bench_npu`` (profiler based: ``warmup``/``rep`` are
        call counts there) when present, else :meth:`bench_events`."""
        self.require()
        do_bench_npu = self._do_bench_npu()
        if do_bench_npu is not None:
            us = do_bench_npu(fn, warmup=max(5, warmup), active=max(30, rep))
            # do_bench_npu returns the kernel's Avg Time(us) from op_statistic.csv
            ms = float(us) / 1000.0
            return TimingResult(ms=ms, method="do_bench_npu", samples=[ms])
        return self.bench_events(fn, warmup=warmup, rep=rep, quantiles=quantiles)

    def bench_events(self, fn: Callable[[], Any], *, warmup: int = 25, rep: int = 100,
                     quantiles: Sequence[float] = (0.2, 0.5, 0.8)) -> TimingResult:
        """Time ``fn`` with ``torch.npu.Event(enable_timing=True)`` pairs, one per call. Needs an NPU."""
        self.require()
        torch, _ = _import_torch_npu()
        for _ in range(max(1, warmup)):
            fn()
        torch.npu.synchronize()
        starts = [torch.npu.Event(enable_timing=True) for _ in range(rep)]
        ends = [torch.npu.Event(enable_timing=True) for _ in range(rep)]
        for s, e in zip(starts, ends):
            s.record()
            fn()
            e.record()
        torch.npu.synchronize()
        samples = [s.elapsed_time(e) for s, e in zip(starts, ends)]
        return timing_from_samples(samples, "npu_event", quantiles)

    @staticmethod
    def _do_bench_npu():
        try:
            testing = importlib.import_module("triton.testing")
        except Exception:  # noqa: BLE001
            return None
        return getattr(testing, "do_bench_npu", None)

    # -- profiler command lines (hardware-free to build, hardware to run) ----------------------
    def msprof_command(self, app: Sequence[str], output_dir: str | Path, *, aic_metrics: str | None = None,
                       extra: Sequence[str] = ()) -> list[str]:
        """``msprof --output=DIR [--aic-metrics=M] app [args]``: system profiling whose parsed output
        has ``op_summary_*.csv``. Building the list needs no hardware; running it does."""
        if not app:
            raise ValueError("msprof needs an application command")
        cmd = [self.msprof, f"--output={Path(output_dir)}"]
        if aic_metrics:
            cmd.append(f"--aic-metrics={aic_metrics}")
        return cmd + list(extra) + [str(a) for a in app]

    def msprof_op_command(self, app: Sequence[str], output_dir: str | Path, *, kernel_name: str | None = None,
                          launch_count: int | None = None, warm_up: int | None = None,
                          aic_metrics: str | None = None) -> list[str]:
        """``msprof op [--output --kernel-name --launch-count --warm-up --aic-metrics] app [args]``
        (msOpProf, per-kernel on-board profiling). Building needs no hardware; running it does."""
        if not app:
            raise ValueError("msprof op needs an application command")
        cmd = [self.msprof, "op", f"--output={Path(output_dir)}"]
        if kernel_name:
            cmd.append(f"--kernel-name={kernel_name}")
        if launch_count is not None:
            if launch_count < 1:
                raise ValueError("launch_count must be >= 1")
            cmd.append(f"--launch-count={int(launch_count)}")
        if warm_up is not None:
            cmd.append(f"--warm-up={int(warm_up)}")
        if aic_metrics:
            cmd.append(f"--aic-metrics={aic_metrics}")
        return cmd + [str(a) for a in app]

    def run_msprof(self, app: Sequence[str], output_dir: str | Path, *, timeout: float = 600,
                   aic_metrics: str | None = "PipeUtilization") -> list[OpSummaryRow]:
        """Run ``msprof`` on ``app`` and parse the op summary it writes. Needs an NPU and CANN's msprof."""
        import shutil
        import subprocess

        self.require()
        if shutil.which(self.msprof) is None:
            raise BackendUnavailable(f"npu: {self.msprof} not found on PATH (source CANN's set_env.sh)")
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(self.msprof_command(app, output_dir, aic_metrics=aic_metrics), capture_output=True,
                              text=True, timeout=timeout)
        summary = find_op_summary(output_dir)
        if summary is None:
            tail = (proc.stderr or proc.stdout or "no output").strip().splitlines()[-1:]
            raise BackendUnavailable(f"npu: msprof wrote no op_summary (exit {proc.returncode}): {tail}")
        return parse_op_summary(summary)


def timing_from_samples(samples: Sequence[float], method: str,
                        quantiles: Sequence[float] = (0.2, 0.5, 0.8)) -> TimingResult:
    """Median ms and the requested quantiles of per-call samples (hardware-free)."""
    if not samples:
        raise ValueError("no timing samples")
    data = sorted(float(s) for s in samples)

    def q(p: float) -> float:
        pos = p * (len(data) - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        return data[lo] + (data[hi] - data[lo]) * (pos - lo)

    return TimingResult(ms=q(0.5), method=method, samples=list(samples),
                        quantiles={f"p{int(p * 100)}": q(p) for p in quantiles})
