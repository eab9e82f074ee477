"""The suite's grouping under pytest-xdist (tests/cpu/conftest.py): the tests of a module with a module-scoped
fixture run on one worker, so the fixture is built once, not once per worker (with pytest 9.2 xdist's own group
suffix is lost and every worker built such fixtures: the interactive run's fixture three times in one CI run)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

MODULE = '''
import json, os, time
import pytest

@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    with open(os.environ["BUILDS"], "a") as f:
        f.write(json.dumps({{"module": __name__, "worker": os.environ.get("PYTEST_XDIST_WORKER")}}) + "\\n")
    return 1

@pytest.mark.parametrize("i", range(6))
def test_uses(shared, i):
    time.sleep(0.05)

@pytest.mark.parametrize("i", range(6))
def test_free_{name}(i):
    time.sleep(0.05)
'''


def test_a_module_fixture_is_built_once_under_loadgroup(tmp_path):
    pytest.importorskip("xdist")
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    for name in ("a", "b"):
        (tmp_path / f"test_{name}.py").write_text(MODULE.format(name=name))
    builds = tmp_path / "builds.jsonl"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                        "--import-mode=importlib", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "BUILDS": str(builds)})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "24 passed" in r.stdout, r.stdout[-1000:]
    rows = [json.loads(x) for x in builds.read_text().splitlines()]
    # one build per module: every test that uses it ran on the worker that built it
    assert sorted(r["module"].rsplit(".", 1)[-1] for r in rows) == ["test_a", "test_b"], rows
