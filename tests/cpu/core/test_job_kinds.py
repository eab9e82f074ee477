"""The worker's job kinds (``tools/exec/kinds.py``): every registered name is a function of its owner module, and a
kind that is not registered is refused before anything is imported for it."""

from __future__ import annotations

import sys

import pytest

from tritondx.tools.exec import kinds, worker


@pytest.mark.parametrize("table", [kinds.JOB_KINDS, kinds.EARLY, kinds.SERVICES])
def test_every_registered_name_is_callable(table):
    for kind in table:
        fn = kinds._load(table, kind, "job kind")
        assert callable(fn), (kind, table[kind])


def test_an_unknown_kind_is_refused_without_importing_it(monkeypatch):
    monkeypatch.delitem(sys.modules, "json.tool", raising=False)
    for kind in ("json.tool:main", "no_such_kind", None, ["probe"]):
        with pytest.raises(ValueError):
            kinds.handler(kind)
        with pytest.raises(ValueError):
            kinds.service(kind)
        assert kinds.early(kind) is None
    assert "json.tool" not in sys.modules


def test_the_worker_answers_an_unknown_kind_as_an_error():
    out = worker.run({"kind": "tritondx.cli:main"})
    assert out["passed"] is False and out["class"] == "exception" and "unknown job kind" in out["error"]


def test_a_rejection_is_the_jobs_answer():
    from tritondx.tools.exec.rejected import Rejected

    def fn(job):
        raise Rejected("mismatch", "output 0 differs")
    assert worker.run({"kind": "verify"}, fn=fn) == {"passed": False, "class": "mismatch", "error": "output 0 differs"}
