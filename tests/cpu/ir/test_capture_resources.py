"""The capture reads a kernel's registers, stack and spills from the report of the compile's own ptxas run
(``-v``), not from a second ptxas run on the PTX (half of a large kernel's capture time); the figures are the ones a
separate ``ptxas -v`` gives."""

from __future__ import annotations

from pathlib import Path

from tritondx.tools.bench import capture as capmod

SOFTMAX = Path(__file__).resolve().parents[3] / "bench" / "suite" / "l2_softmax.py"


def test_resources_come_from_the_compiles_own_ptxas_run(tmp_path, monkeypatch):
    second_runs = []
    second = capmod._resources

    def counted(ptx, workdir):
        second_runs.append(ptx)
        return second(ptx, workdir)

    monkeypatch.setattr(capmod, "_resources", counted)
    res = capmod.capture({"kind": "capture", "task": str(SOFTMAX), "target": "cuda:90", "out_dir": str(tmp_path),
                          "per_pass": False, "shape": None})
    assert second_runs == []   # no ptxas run beside the compile's
    (launch,) = res["launches"]
    got = launch["resources"]
    assert got["registers"] > 0 and {"stack_bytes", "spill_store_bytes", "spill_load_bytes"} <= set(got)
    ptx = Path(launch["stages"]["ptx"]).read_text()
    assert {k: v for k, v in got.items() if k != "shared_bytes"} == second(ptx, tmp_path)
