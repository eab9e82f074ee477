"""The rewrite tests' light check (``conftest.check_light``) and the warm interpreter host it runs in
(``tests/cpu/tdx_interp.py``): a candidate whose output differs at a check shape, or that returns another number of
outputs, fails it and the original passes; one check leaves the next nothing (its modules, its
environment, a hang or a dead host)."""

from __future__ import annotations

from tdx_interp import run_interpreted


def test_the_light_check_passes_the_original_and_fails_a_wrong_candidate(rw, tmp_path):
    task = rw.task_path("grid_to_cores")
    assert rw.check_light(task, task) == ""
    src = task.read_text()
    assert "tl.maximum(" in src
    wrong = tmp_path / "wrong.py"
    wrong.write_text(src.replace("tl.maximum(", "tl.minimum("))
    assert "output 0" in rw.check_light(task, wrong) and "elements off" in rw.check_light(task, wrong)
    two = tmp_path / "two.py"
    two.write_text(src + "\n\n_launch = launch\n\n\ndef launch(*a):\n    return _launch(*a), _launch(*a)\n")
    assert "2 outputs, the initial kernel returns 1" in rw.check_light(task, two)


def test_a_check_leaves_the_next_one_nothing(tmp_path):
    helper = tmp_path / "tdx_probe_helper.py"
    helper.write_text("VALUE = 1\n")
    code = ("import os, sys\nsys.path.insert(0, sys.argv[1])\nimport tdx_probe_helper\n"
            "print(tdx_probe_helper.VALUE, os.environ.get('TDX_PROBE'), os.environ['TRITON_INTERPRET'])\n"
            "os.environ['TDX_PROBE'] = 'left'\n")
    first = run_interpreted(code, str(tmp_path), env={"TDX_PROBE": "set"})
    assert (first.returncode, first.stdout) == (0, "1 set 1\n"), first.stderr
    helper.write_text("VALUE = 2\n")   # a fresh process would import the new file, and see no TDX_PROBE
    second = run_interpreted(code, str(tmp_path))
    assert (second.returncode, second.stdout) == (0, "2 None 1\n"), second.stderr
    assert run_interpreted("import sys\nsys.exit('no')\n").returncode == 1


def test_a_hang_or_a_dead_host_fails_that_check_only():
    hung = run_interpreted("import time\ntime.sleep(60)\n", timeout=2)
    assert hung.returncode != 0 and "did not finish within 2 s" in hung.stderr
    dead = run_interpreted("import os\nos._exit(3)\n", timeout=30)
    assert dead.returncode != 0 and "ended" in dead.stderr
    assert run_interpreted("print('ok')\n").stdout == "ok\n"
