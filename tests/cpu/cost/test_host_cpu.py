"""The host's CPU half of "where the time goes" (``tools/run/host.py``): a run's CPU seconds include the jobs it waited
for, and the batch's host figure sees CPU burned meanwhile."""

from __future__ import annotations

import subprocess
import sys

from tritondx.tools.run.host import HostCpu, host_cpu_line, process_cpu_seconds

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0:\n    pass\n"


def test_a_waited_for_child_counts_in_the_process_cpu_seconds_and_the_host_busy_seconds():
    before = process_cpu_seconds()
    host = HostCpu().start()
    subprocess.run([sys.executable, "-c", BURN], check=True)
    after = process_cpu_seconds()
    h = host.summary()
    assert before is not None and after is not None and h is not None
    assert after["children"] - before["children"] >= 0.9, (before, after)
    assert h["children_cpu_s"] >= 0.9 and h["busy_cpu_s"] >= 0.9, h
    assert 0 < h["busy_fraction"] <= 1 and h["cores"] >= 1
    line = host_cpu_line(h)
    assert "host CPU busy" in line and f"{h['cores']} cores" in line


def test_a_running_descendant_counts_as_live():
    """A job still running when the report is written (a judge server) counts too, with what it waited for."""
    import time
    code = "import subprocess, sys, time\n" + f"subprocess.run([sys.executable, '-c', {BURN!r}])\n" + "time.sleep(30)\n"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 20
        live = 0.0
        while time.monotonic() < deadline:
            live = process_cpu_seconds()["live"]
            if live >= 0.9:
                break
            time.sleep(0.2)
        assert live >= 0.9, live   # the grandchild's burned second, waited for by the child that still runs
    finally:
        proc.kill()
        proc.wait()
