"""Bad input: every malformed task file in bad_tasks/ is answered by `tritondx optimize FILE` with
exactly one line on stderr that names the file and the problem, a non-zero exit code, and no
traceback (with `--debug`: the traceback, then the same line).

Static problems are found without running the task; the rest by the sandboxed probe job, which has a
timeout (TRITONDX_PROBE_TIMEOUT) and the backend's memory limit. Every static problem and a few the probe
finds (``CLI_PROBE``) go through the command as a user runs it (its exit code, its one line, no run folder
left); the probe's other answers are checked where the command gets them (the task's static check, then
``probe_task``): one ``tritondx`` process each cost 5-7 s of a loaded 2-core CI machine, most of it the start.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tdx_rel import BAD, Case, base_env, one_line, run_cli

PROBE_TIMEOUT_S = "8"  # only for the endless-loop task: every other probe keeps the default

# file -> a substring the one line must hold (besides the file's name)
EXPECT: dict[str, str] = {
    # static: the file is read and parsed, nothing runs
    "syntax_error.py": "syntax error at line 18",
    "no_kernel.py": "no kernel",
    "no_launcher.py": "no launcher",
    "no_reference.py": "no reference",
    "no_make_inputs.py": "no input maker",
    "no_tolerance.py": "no TOLERANCE",
    "no_bench_shapes.py": "no BENCH_SHAPES",
    "empty_shapes.py": "CHECK_SHAPES is empty",
    "check_shapes_not_list.py": "CHECK_SHAPES must be a list, got int",
    "check_shapes_computed_not_list.py": "CHECK_SHAPES must be a list, got a generator",
    "tolerance_not_dict.py": "TOLERANCE must be a dict",
    "empty_file.py": "the file is empty",
    "not_utf8.py": "not UTF-8",
    "not_python.txt": "must be a Python file (.py)",
    "directory_task.py": "is a directory",
    # run in the sandboxed probe
    "reference_raises.py": "reference raised ValueError: reference is broken",
    "launcher_raises.py": "launch raised RuntimeError: launcher is broken",
    "launch_wrong_arity.py": "launch raised TypeError",
    "wrong_shape.py": "launch output 0 is (999,)",
    "wrong_dtype.py": "torch.float64, reference gives (1000,) torch.float32",
    "wrong_output_count.py": "launch returned 2 outputs, reference 1",
    "launch_returns_none.py": "launch output 0 is NoneType, not a tensor",
    "launch_wrong_result.py": "the initial launch does not match the reference",
    "shape_too_large.py": "ran out of memory (asked for 3725.3 GiB): the shape is too large",
    "non_tensor_inputs.py": "make_inputs must return tensors (and plain scalars), got ['list']",
    "inputs_all_zeros.py": "input 0 is all zeros",
    "make_inputs_raises.py": "raised KeyError",
    "reference_not_tensor.py": "reference must return tensors, got ['float']",
    "no_triton_launch.py": "launch ran no Triton kernel",
    "kernel_compile_error.py": "kernel axpy_kernel does not compile: line 11 "
                               "`offs = pid * BLOCK + tl.arange(0, 100)`",
    "missing_module.py": "import failed: No module named 'kernel_helpers_that_do_not_exist'",
    "import_raises.py": "raised at import: ZeroDivisionError",
    "infinite_loop_at_import.py": f"did not finish within {PROBE_TIMEOUT_S} s",
    "sys_exit_at_import.py": "called sys.exit(3) at import",
    "os_exit_in_launch.py": "ended the process (exit code 0) before the probe finished",
    "tolerance_missing_dtype.py": "TOLERANCE has no entry for float16",
    "unknown_dtype.py": "DTYPES: unknown dtype 'float33'",
    # task settings (issue 15): static where the file shows them, else in the probe
    "zero_size_shape.py": "CHECK_SHAPES[1] = (0,) has a zero-size dimension",
    "deeply_nested.py": "an expression is nested too deeply to parse (RecursionError)",
    "nested_too_deep.py": "levels deep (at most 100): split the deepest expression",
    "tolerance_nan.py": "TOLERANCE[float32] atol is nan: it must be a finite number >= 0",
    "tolerance_negative.py": "TOLERANCE[float32] rtol is -0.001: it must be a finite number >= 0",
    "reference_returns_nan.py": "CHECK_SHAPES[1] = (40097,): the reference returned NaN/Inf",
    "zero_size_computed_shape.py": "CHECK_SHAPES[2] = (0,) has a zero-size dimension",
    "later_shape_unbuildable.py": "CHECK_SHAPES[2] = (8193,): make_inputs((8193,), float32, seed=1234, device='cpu') "
                                  "raised ValueError: cannot build (8193,)",
    "launch_leaves_thread.py": "task code left 1 non-daemon thread(s) running (forever)",
}
# answered within this probe timeout (the default is 300 s): a job that waited for the thread at exit
# would be answered "did not finish within ..." instead
PROBE_TIMEOUT_FOR = {"infinite_loop_at_import.py": PROBE_TIMEOUT_S, "launch_leaves_thread.py": "90"}
# also run with --debug: the traceback is shown, and the last line is still the one-line answer
DEBUG = ["no_reference.py", "reference_raises.py", "kernel_compile_error.py", "directory_task.py"]
# static problems: answered before any heavy import or sandbox job, without a run folder
STATIC = ["syntax_error.py", "no_kernel.py", "no_launcher.py", "no_reference.py", "no_make_inputs.py",
          "no_tolerance.py", "no_bench_shapes.py", "empty_shapes.py", "check_shapes_not_list.py",
          "check_shapes_computed_not_list.py", "tolerance_not_dict.py", "empty_file.py", "not_utf8.py",
          "not_python.txt", "directory_task.py", "zero_size_shape.py", "deeply_nested.py", "nested_too_deep.py"]


# problems the probe finds that also go through the command: a task code error, a compile error, the probe's
# timeout from the environment, a process that ends itself
CLI_PROBE = ["reference_raises.py", "kernel_compile_error.py", "infinite_loop_at_import.py", "os_exit_in_launch.py",
             "wrong_shape.py"]
IN_PROCESS = [n for n in EXPECT if n not in STATIC and n not in CLI_PROBE]


def _optimize(path: Path, debug: bool = False):
    def fn(tmp: Path):
        extra = {"TRITONDX_PROBE_TIMEOUT": PROBE_TIMEOUT_FOR[path.name]} if path.name in PROBE_TIMEOUT_FOR else {}
        args = (["--debug"] if debug else []) + ["optimize", str(path), "--backend", "interpreter",
                                                  "--out", str(tmp / "run")]
        return run_cli(*args, tmp=tmp, env=base_env(tmp, **extra), timeout=400), tmp / "run"
    return fn


CASES = [Case(f"bad:{name}", _optimize(BAD / name), cost=1.0 if name in STATIC else 4.0)
         for name in EXPECT if name not in IN_PROCESS]
DEBUG_CASES = [Case(f"bad-debug:{name}", _optimize(BAD / name, debug=True), cost=4.0) for name in DEBUG]


def test_every_bad_task_has_an_expectation():
    assert sorted(p.name for p in BAD.iterdir()) == sorted(EXPECT), "bad_tasks/ and EXPECT disagree"
    assert len(EXPECT) >= 25


@pytest.mark.parametrize("rcase", CASES, ids=[c.id.split(":", 1)[1] for c in CASES])
def test_bad_task_one_line(rcase: Case, rel_outcomes):
    name = rcase.id.split(":", 1)[1]
    r, run_dir = rel_outcomes[rcase.id].result()
    lines = one_line(r.stderr)
    assert r.returncode == 2, f"{name}: exit {r.returncode}\n{r.stderr[-2000:]}"
    assert len(lines) == 1, f"{name}: want exactly one line on stderr, got:\n{r.stderr[-3000:]}"
    line = lines[0]
    assert line.startswith("tritondx: error: ") and name in line, line
    assert EXPECT[name] in line, f"{name}: {line!r} lacks {EXPECT[name]!r}"
    assert "Traceback" not in r.stderr and r.stdout.strip() == "", r.stdout[-1000:]
    # static problems are answered before a run folder is made; a task the probe rejects has its
    # half-made run folder removed (runner.discard_run_dir)
    assert not run_dir.exists(), f"{name}: run folder left behind: {sorted(p.name for p in run_dir.iterdir())}"


@pytest.mark.parametrize("rcase", DEBUG_CASES, ids=[c.id.split(":", 1)[1] for c in DEBUG_CASES])
def test_bad_task_debug_shows_traceback(rcase: Case, rel_outcomes):
    name = rcase.id.split(":", 1)[1]
    r, _ = rel_outcomes[rcase.id].result()
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback (most recent call last)" in r.stderr
    last = one_line(r.stderr)[-1]
    assert last.startswith("tritondx: error: ") and name in last and EXPECT[name] in last, last


@pytest.mark.parametrize("name", IN_PROCESS)
def test_bad_task_problem_found_by_the_probe(name, tmp_path, monkeypatch):
    """What the command prints for these: its static check passes, the sandboxed probe answers one line that names
    the file and the problem (``TaskFormatError``; the command prints it after ``tritondx: error: ``)."""
    from tritondx.errors import TaskFormatError
    from tritondx.tools.backends.interpreter.backend import InterpreterBackend
    from tritondx.tools.task.probe_job import probe_task
    from tritondx.tools.task.spec import load_task
    monkeypatch.setenv("TRITONDX_CACHE", str(tmp_path / "cache"))
    path = BAD / name
    timeout = float(PROBE_TIMEOUT_FOR[name]) if name in PROBE_TIMEOUT_FOR else None
    with pytest.raises(TaskFormatError) as err:
        load_task(path)
        probe_task(str(path), InterpreterBackend(), timeout=timeout)
    line = str(err.value)
    assert line.splitlines() == [line] and name in line, line
    assert EXPECT[name] in line, f"{name}: {line!r} lacks {EXPECT[name]!r}"
