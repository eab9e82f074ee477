"""Fixtures for the Ascend (NPU) tests.

Compile-level tests need the triton-ascend environment (``tools/npu/toolchain.py``); the
``ascend_python`` fixture skips them with the reason when it is absent. Every capture the tests
use is compiled once per session, two at a time, by the ``captures`` fixture.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from tritondx.errors import BackendUnavailable
from tritondx.tools.npu.capture import AscendCapture, capture_ascend
from tritondx.tools.npu.toolchain import find_python

HERE = Path(__file__).parent
KERNELS = HERE / "kernels"
DATA = HERE / "data"

#: (kernel task file stem, target) pairs compiled once per session.
CAPTURE_SET: tuple[tuple[str, str], ...] = tuple(
    [(stem, "ascend910b") for stem in (
        "k_contiguous", "k_gather", "k_gather_rows", "k_mask_loop", "k_loop_nomask", "k_branch_loop", "k_int64",
        "k_ub_big", "k_ub_nodouble", "k_big_grid", "k_many_waves", "k_gpu_settings", "k_dot_odd", "k_dot_ok",
        "k_autotune", "k_launch_error", "k_scatter")]
    + [("k_gather", "ascend950"), ("k_ub_nodouble", "ascend950"), ("k_contiguous", "ascend910_93")]
)


@pytest.fixture(scope="session")
def ascend_python() -> str:
    try:
        return find_python()
    except BackendUnavailable as exc:
        pytest.skip(f"triton-ascend environment absent: {exc}")


@pytest.fixture(scope="session")
def captures(ascend_python, built_once) -> dict[tuple[str, str], AscendCapture]:
    def build(root: Path) -> dict[tuple[str, str], AscendCapture]:
        def one(key):
            stem, target = key
            return key, capture_ascend(str(KERNELS / f"{stem}.py"), target, root / f"{stem}-{target}",
                                       python=ascend_python, timeout=240)

        with ThreadPoolExecutor(max_workers=2) as pool:
            return dict(pool.map(one, CAPTURE_SET))
    return built_once("ascend_captures", build)
