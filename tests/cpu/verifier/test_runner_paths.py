"""The runner's files by path (issue 36: ``tools/verify/`` in zones): the judge starts ``runner/runner.py`` and
``runner/zygote.py`` as scripts, they load their siblings by path, and both bind the package's own folder back
into a runner's fresh /tmp. A wrong path breaks every verification or, worse, silently leaves the checkout out."""

from __future__ import annotations

from pathlib import Path

import tritondx
from tritondx.tools.verify.judge import spawn, warm
from tritondx.tools.verify.runner import zygote

RUNNER_DIR = Path(tritondx.__file__).resolve().parent / "tools" / "verify" / "runner"


def test_the_judge_starts_the_runner_scripts_of_the_untrusted_zone():
    assert spawn.RUNNER_PY.resolve() == RUNNER_DIR / "runner.py"
    assert warm.ZYGOTE_PY.resolve() == RUNNER_DIR / "zygote.py"
    for sibling in ("guard", "wire", "fake_gpu"):   # runner._load_sibling, zygote._preload
        assert (RUNNER_DIR / f"{sibling}.py").is_file()


def test_a_runner_binds_back_the_package_root():
    root = Path(tritondx.__file__).resolve().parent
    assert Path(zygote.PACKAGE_ROOT).resolve() == root
    assert str(root) in {str(Path(p).resolve()) for p in zygote._needed()}


def _imports(path: Path) -> set[str]:
    import ast
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            out |= {base} | {f"{base}.{a.name}" for a in node.names}
    return out


def test_the_zones_import_one_way():
    """``runner/`` imports no verify module (its files are loaded by path in the candidate's process); ``plan/``
    imports neither the judge nor the runner."""
    verify = RUNNER_DIR.parent
    for path in sorted(RUNNER_DIR.glob("*.py")):
        assert not [m for m in _imports(path) if m.startswith("tritondx.tools.verify")], path
        assert not [m for m in _imports(path) if m.startswith(".")], path   # nor a sibling as a package
    for path in sorted((verify / "plan").glob("*.py")):
        bad = [m for m in _imports(path) if m.startswith(("tritondx.tools.verify.judge", "tritondx.tools.verify.runner"))]
        assert bad == [], (path, bad)
