"""The package's layout targets (issue 36), read from the source with ``ast``: no import circles, the
``tools/`` folders in one order (no folder imports one that imports it back), tools that never import the graph,
its state or an agent, no module over 600 lines, and no backend compared by name outside ``tools/backends/``.

Every import counts, a function-level one too: a lazy import is still a dependency."""

from __future__ import annotations

import ast
import collections
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PKG = "tritondx"
#: folders that are not the package's code (tests, results, environments, run output)
OUTSIDE = {".venv", ".npu-venv", "build", "runs", "tests", ".git", "bench", "docs", "examples", "scripts",
           "tritondx.egg-info", "__pycache__", "prompts", "checkpoints"}
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in OUTSIDE or "__pycache__" in rel.parts:
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([PKG, *parts])] = path
    return out


def _edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = collections.defaultdict(set)
    for name, path in mods.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package[:len(package) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            edges[name].update(t for t in targets if t in mods and t != name)
    return edges


def _cycles(edges: dict[str, set[str]], nodes) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _folder(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[1] == "tools" else None


def test_no_import_circles():
    mods = _modules()
    assert len(mods) > 100
    assert _cycles(_edges(mods), sorted(mods)) == []


def test_tools_folders_import_in_one_direction():
    mods = _modules()
    folder_edges: dict[str, set[str]] = collections.defaultdict(set)
    why: dict[tuple[str, str], list[tuple[str, str]]] = collections.defaultdict(list)
    for a, targets in _edges(mods).items():
        for b in targets:
            fa, fb = _folder(a), _folder(b)
            if fa and fb and fa != fb:
                folder_edges[fa].add(fb)
                why[(fa, fb)].append((a, b))
    bad = []
    for comp in _cycles(folder_edges, sorted(folder_edges)):
        bad += [(fa, fb, why[(fa, fb)][:3]) for fa in comp for fb in comp if (fa, fb) in why]
    assert bad == []


def test_tools_never_import_the_graph_its_state_or_an_agent():
    mods = _modules()
    top = {f"{PKG}.graph", f"{PKG}.state", f"{PKG}.runner", f"{PKG}.cli", f"{PKG}.batch", f"{PKG}.replay"}
    bad = [(a, b) for a, targets in _edges(mods).items() if a.startswith(f"{PKG}.tools.")
           for b in targets if b in top or b.startswith(f"{PKG}.agents")]
    assert bad == []


def test_no_module_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in _modules().values()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


#: a backend name compared: ``== "npu"``, ``'cuda' !=``, ``in ("cuda", ...)``, ``.startswith("ascend")`` (on a line
#: that names a backend or a compile target)
BACKEND_NAME_CMP = re.compile(r"""(==|!=)\s*["'](cuda|npu|interpreter|ascend)["']|["'](cuda|npu|interpreter|ascend)["']\s*"""
                              r"""(==|!=)|\s(not\s+)?in\s*[(\[{]\s*["'](cuda|npu|interpreter|ascend)["']|"""
                              r"""\.startswith\(\s*["'](cuda|npu|interpreter|ascend)""")


def compares_backend_by_name(line: str) -> bool:
    """``if backend.name == "npu"``, ``backend_name != "cuda"``, ``state.get("backend") == "interpreter"``,
    ``target.startswith("ascend")``; not a torch device kind (``x.device.type == "cuda"``: the candidate's own
    test, read by the branch planner; ``device.startswith("cuda")``: whether a job synchronizes) or a detector id."""
    return bool(re.search(r"backend|target", line)) and bool(BACKEND_NAME_CMP.search(line))


def test_backends_are_asked_not_compared_by_name():
    bad = []
    for name, path in _modules().items():
        if name.startswith(f"{PKG}.tools.backends"):
            continue
        for no, line in enumerate(path.read_text().splitlines(), 1):
            if compares_backend_by_name(line):
                bad.append(f"{path.relative_to(ROOT)}:{no}: {line.strip()}")
    assert bad == []


def test_the_layout_checks_can_fail(tmp_path):
    """The checks see a circle, a long module and a name comparison when there is one."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges, sorted(edges)) == [["a", "b", "c"]]
    assert compares_backend_by_name('    if backend.name == "npu":')
    assert compares_backend_by_name("if cfg.backend != 'cuda'")
    assert compares_backend_by_name('elif backend in ("cuda", "interpreter"):')
    assert compares_backend_by_name('where = "" if state.get("backend") == "interpreter" else ""')
    assert not compares_backend_by_name("if backend.can_time:")
    assert compares_backend_by_name('    if target.startswith("ascend"):')
    assert not compares_backend_by_name('if x.device.type == "cuda":')


def test_pyproject_names_every_package():
    """A wheel (not the editable install) carries only the packages pyproject.toml lists: each folder with an
    ``__init__.py`` under agents/, tools/ and prompts/ must be there."""
    import tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {PKG} | {".".join([PKG, *p.parent.relative_to(ROOT).parts])
                       for top in ("agents", "tools", "prompts") for p in (ROOT / top).rglob("__init__.py")
                       if "__pycache__" not in p.parts}
    assert folders - listed == set()
    assert listed - folders == set()
