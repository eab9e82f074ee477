"""The rewrite tests' light check (``conftest.check_light``): a candidate whose output differs at a check shape, or
that returns another number of outputs, fails it; the original passes."""

from __future__ import annotations


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
