"""The launch job (what ncu profiles in the profile tier) says where its time went after the gate: its steps come back
in its result, and the ncu session record carries them (``NcuSession.steps``, the profile artifact's ``ncu_session``)."""

from __future__ import annotations

from pathlib import Path

from tritondx.tools.exec.sandbox import run_job

AXPY = Path(__file__).parents[1] / "verifier" / "tiny_axpy.py"


def test_the_launch_job_reports_its_steps():
    r = run_job({"kind": "launch", "task": str(AXPY), "device": "cpu", "repeat": 2, "shape": [1024]},
                timeout=300,
                env={"TRITON_INTERPRET": "1"})
    assert r.ok, r.message
    steps = r.result["steps"]
    assert {"load_s", "gate_wait_s", "device_wait_s", "inputs_s", "call1_s", "call2_s"} <= set(steps), steps
    assert steps["load_s"] > 0 and all(v >= 0 for v in steps.values())
    assert steps["gate_wait_s"] < 1.0   # no gate asked for: the job goes on at once
