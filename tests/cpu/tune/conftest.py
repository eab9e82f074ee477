"""Shared by the tuner's tests: an emitted task source run under the Triton interpreter in this process."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import pytest

_names = itertools.count()


@pytest.fixture
def load_interpreted(monkeypatch):
    """Loads a task file with ``TRITON_INTERPRET=1`` (its kernels become interpreted functions) under a module name
    of its own, so every test's emitted source is a fresh module (was: a Python process each, ~2 s of CPU to import
    torch and triton again)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")

    def load(path: Path):
        spec = importlib.util.spec_from_file_location(f"_tdx_emitted_{next(_names)}", str(path))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    return load
