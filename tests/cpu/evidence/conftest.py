"""Fixtures of the evidence tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def capture_calls(monkeypatch) -> list[bool]:
    """The tiers' own IR compiles (``analysis.capture_ir``), each as its ``per_pass`` flag; an ahead capture's job
    (``tools/evidence/ahead.py``) is not one of them."""
    from tritondx.tools.evidence import analysis
    calls: list[bool] = []
    real = analysis.capture_ir

    def capture_ir(task_path, out_dir, target, per_pass, *a, **kw):
        calls.append(per_pass)
        return real(task_path, out_dir, target, per_pass, *a, **kw)
    monkeypatch.setattr(analysis, "capture_ir", capture_ir)
    return calls
