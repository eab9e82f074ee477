"""Fixtures for the NVIDIA IR detector tests.

Every task file under ``kernels/`` is compiled for cuda:90 once per session, through the same JIT-faithful
sandboxed capture the tool uses (``capture_ir``; ``per_pass=True`` for the kernels the compiler-tier tests
read), two at a time. Tests get the
launches as ``KernelIR`` lists keyed by the task's stem.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tritondx.tools.ir.context import KernelIR, load_capture
from tritondx.tools.task.capture_job import capture_ir

HERE = Path(__file__).parent
KERNELS = HERE / "kernels"
#: kernels the compiler-tier tests read (captured with MLIR_ENABLE_DUMP per-pass dumps); the rest need only
#: the final stages, which keeps the session's compile work down.
PER_PASS = {"k_vadd", "k_scalar", "k_dot_f16", "k_dot_ieee", "k_dot_small_m", "k_transposed", "k_small_grid",
            "k_layout_cvt", "k_norm_three_loops"}


def _capture(task: Path, root: Path) -> tuple[str, list[KernelIR] | str]:
    out = root / task.stem
    manifest, err = capture_ir(str(task), out, "cuda:90", per_pass=task.stem in PER_PASS, timeout=300)
    if manifest is None:
        return task.stem, err
    return task.stem, load_capture(out / "manifest.json", task.read_text(), arch=90, source_path=str(task))


@pytest.fixture(scope="session")
def captures(built_once) -> dict[str, list[KernelIR]]:
    def build(root: Path) -> dict[str, list[KernelIR]]:
        tasks = sorted(KERNELS.glob("k_*.py"))
        with ThreadPoolExecutor(max_workers=2) as pool:
            results = dict(pool.map(lambda t: _capture(t, root), tasks))
        failed = {k: v for k, v in results.items() if isinstance(v, str)}
        assert not failed, f"captures failed: {failed}"
        return results
    return built_once("nvidia_captures", build)
