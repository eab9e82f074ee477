"""The task format: valid tasks load; each broken one gets one line naming the file and the problem."""

import pytest

from tritondx.errors import TaskFormatError
from tritondx.tools.task.spec import load_task, parse_task_source

EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[3] / "examples"

GOOD = (EXAMPLES / "add_tiny_block.py").read_text()


@pytest.mark.parametrize("name", ["add_tiny_block", "softmax_three_pass", "matmul_no_dot"])
def test_examples_load(name):
    spec = load_task(EXAMPLES / f"{name}.py")
    assert spec.kernels and spec.launch_lineno > 0


BROKEN = {
    "syntax": (GOOD.replace("def launch(x, y):", "def launch(x, y)"), "syntax error at line"),
    "no_kernel": (GOOD.replace("@triton.jit\n", ""), "no kernel"),
    "no_launch": (GOOD.replace("def launch(", "def launcher("), "no launcher"),
    "no_reference": (GOOD.replace("def reference(", "def ref("), "no reference"),
    "no_make_inputs": (GOOD.replace("def make_inputs(", "def inputs("), "no input maker"),
    "no_check_shapes": (GOOD.replace("CHECK_SHAPES =", "SHAPES ="), "no CHECK_SHAPES"),
    "empty_shapes": (GOOD.replace("CHECK_SHAPES = [(1000,), (4097,), (65536,)]", "CHECK_SHAPES = []"),
                     "CHECK_SHAPES is empty"),
    "no_tolerance": (GOOD.replace("TOLERANCE =", "TOL ="), "no TOLERANCE"),
    "no_dtypes": (GOOD.replace("DTYPES =", "TYPES ="), "no DTYPES"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_task_one_line(case, tmp_path):
    source, needle = BROKEN[case]
    path = tmp_path / f"{case}.py"
    path.write_text(source)
    with pytest.raises(TaskFormatError) as info:
        load_task(path)
    msg = str(info.value)
    assert msg.startswith(str(path)) and needle in msg and "\n" not in msg


def test_not_python_and_missing(tmp_path):
    with pytest.raises(TaskFormatError, match="no such file"):
        load_task(tmp_path / "nope.py")
    (tmp_path / "t.txt").write_text(GOOD)
    with pytest.raises(TaskFormatError, match="Python file"):
        load_task(tmp_path / "t.txt")


def test_kernel_info():
    spec = parse_task_source(GOOD, "x.py")
    k = spec.kernel("axpy_kernel")
    assert k.constexpr_params == ["BLOCK"] and k.params[0] == "x_ptr"
