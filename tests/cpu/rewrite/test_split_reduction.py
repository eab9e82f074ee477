"""split_reduction: few long rows -> the row reduction split across programs in two stages, on a kernel written
for the test (a row RMS; and its max variant). Triage's launch_grid_small (from the launches recorded by running
the task) motivates it; the candidates verify under the interpreter; the candidate's recorded launches show the
split kernel filling the SMs (no launch_grid_small on it) and the original kernel gone. Kernels whose loop
carries other state are left alone."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tritondx.tools.evidence.triage import triage
from tritondx.tools.evidence.triage_launches import launch_findings
from tritondx.tools.rewrite.base import RewriteContext
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.rewrite.split_reduction import split_source
from tritondx.tools.task.spec import load_task

TASK = "split_reduction"
_spec = importlib.util.spec_from_file_location("_tl", Path(__file__).with_name("test_triage_launches.py"))
_tl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_tl)


def test_few_long_rows_split(rw, tmp_path):
    path = rw.task_path(TASK)
    spec = load_task(path)
    kclass, found = triage(spec, _tl.record(path, (8, 1 << 16)))
    (small,) = [f for f in found if f.detector == "launch_grid_small"]
    assert small.metric["programs"] == 8
    ctx = RewriteContext(spec=spec, original=spec, kernel_class=kclass, findings=found, dtypes=["float32"],
                         tolerances={"float32": (1e-5, 1e-5)})
    (p,) = [p for p in propose(ctx, limit=8) if p.family == "split_reduction"]
    assert small.id in p.motivated_by
    rw.verify(TASK, p.source, tmp_path, "c0")
    after = launch_findings(_tl.record_source(p.source, (8, 1 << 16)), p.source)
    kernels = {f.kernel for f in after if f.detector == "launch_work"}
    assert kernels == {"row_rms_kernel_tdx_split", "row_rms_kernel_tdx_combine"}
    work = next(f for f in after if f.detector == "launch_work" and f.kernel == "row_rms_kernel_tdx_split")
    assert work.metric["programs"] >= 3 * 132     # whole blocks per chunk: 8 rows x 64 chunks
    assert not [f for f in after if f.detector == "launch_grid_small" and f.kernel == "row_rms_kernel_tdx_split"]


def test_max_variant(rw, tmp_path):
    src = rw.task_path(TASK).read_text().replace(
        "acc = tl.zeros([BLOCK], tl.float32)", 'acc = tl.full([BLOCK], float("-inf"), tl.float32)').replace(
        "other=0.0).to(tl.float32)", 'other=float("-inf")).to(tl.float32)').replace(
        "acc += v * v", "acc = tl.maximum(acc, v)").replace("total = tl.sum(acc, axis=0)", "total = tl.max(acc, axis=0)").replace(
        "tl.store(out_ptr + row, tl.sqrt(total / N))", "tl.store(out_ptr + row, total)").replace(
        "return torch.sqrt((x.float() ** 2).mean(-1))", "return x.float().amax(-1)")
    task = tmp_path / "few_long_rows_max.py"
    task.write_text(src)
    out, _ = split_source(src)
    assert 'other=float("-inf"))' in out and "tl.max(_tdx_p, axis=0)" in out
    cand = tmp_path / "cand.py"
    cand.write_text(out)
    from tritondx.tools.backends.registry import get_backend
    from tritondx.tools.verify.verification import verify_candidate
    r = verify_candidate(str(task), str(cand), "c", get_backend("interpreter"))
    assert r.passed, f"{r.klass}: {r.reason}"


def test_carried_state_or_mismatched_update_left_alone(rw):
    src = rw.task_path(TASK).read_text()
    assert split_source(src.replace("acc += v * v", "acc = tl.maximum(acc, v)")) is None      # update vs tl.sum
    carried = src.replace("    acc = tl.zeros([BLOCK], tl.float32)\n",
                          "    acc = tl.zeros([BLOCK], tl.float32)\n    n = 0\n").replace(
        "        acc += v * v\n", "        acc += v * v\n        n += 1\n").replace("total / N", "total / n")
    assert split_source(carried) is None
    stores = src.replace("        acc += v * v\n", "        acc += v * v\n        tl.store(out_ptr + row, 0.0)\n")
    assert split_source(stores) is None
