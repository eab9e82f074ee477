"""Which calls the judge makes (the seam of the check planner): one function gives the list of
check cases; another makes a case's inputs. Seeds are drawn here, on the trusted side, with the
``secrets`` module: nothing the candidate can read holds them."""

from __future__ import annotations

import secrets
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from tritondx.tools.taskmod import as_tuple, dtype_name, norm_shape, to_dtype

SEEDS_PER_SHAPE = 2


class CheckCase(BaseModel):
    shape: Any
    dtype: str
    seed: int
    values: str = "normal"
    why: str = ""


def plan_cases(task_mod: ModuleType, original_source: str, candidate_source: str, device: str,
               include_bench: bool = False) -> list[CheckCase]:
    """CHECK_SHAPES (and BENCH_SHAPES when ``include_bench``) x DTYPES x fresh seeds."""
    shapes = [norm_shape(s) for s in task_mod.CHECK_SHAPES]
    if include_bench:
        shapes += [norm_shape(s) for s in task_mod.BENCH_SHAPES if norm_shape(s) not in shapes]
    return [CheckCase(shape=shape, dtype=dtype_name(to_dtype(d)), seed=secrets.randbelow(1 << 30),
                      why="BENCH_SHAPES" if i >= len(task_mod.CHECK_SHAPES) else "CHECK_SHAPES")
            for d in task_mod.DTYPES for i, shape in enumerate(shapes) for _ in range(SEEDS_PER_SHAPE)]


def make_case_inputs(task_mod: ModuleType, case: CheckCase, device: str) -> tuple:
    return as_tuple(task_mod.make_inputs(case.shape, to_dtype(case.dtype), case.seed, device))
