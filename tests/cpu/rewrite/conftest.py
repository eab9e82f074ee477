"""Helpers for the rewrite-catalog tests: contexts built from real tasks, verification under the interpreter."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from tritondx.tools.backends.registry import get_backend
from tritondx.tools.records.evidence import Finding
from tritondx.tools.rewrite import expert  # noqa: F401  (registers every family)
from tritondx.tools.rewrite.base import CATALOG, Proposal, RewriteContext
from tritondx.tools.task.spec import load_task, parse_task_source
from tritondx.tools.evidence.triage import triage
from tritondx.tools.verify.verification import verify_candidate

REPO = Path(__file__).resolve().parents[3]
SUITE = REPO / "bench" / "suite"
EXAMPLES = REPO / "examples"
KERNELS = Path(__file__).resolve().parent / "kernels"
FAMILIES = REPO / "bench" / "families"


def task_path(name: str) -> Path:
    for folder in (SUITE, EXAMPLES, FAMILIES, KERNELS):
        p = folder / (name if name.endswith(".py") else name + ".py")
        if p.exists():
            return p
    raise FileNotFoundError(name)


def _dtypes_and_tolerances(source: str) -> tuple[list[str], dict[str, tuple[float, float]]]:
    tree = ast.parse(source)
    dtypes: list[str] = []
    tols: dict[str, tuple[float, float]] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "DTYPES":
                dtypes = [ast.unparse(e).replace("torch.", "") for e in node.value.elts]
            if node.targets[0].id == "TOLERANCE" and isinstance(node.value, ast.Dict):
                for k, v in zip(node.value.keys, node.value.values):
                    d = ast.literal_eval(v)
                    tols[ast.unparse(k).replace("torch.", "").strip("'\"")] = (d["atol"], d["rtol"])
    return dtypes, tols


def make_context(name: str, suggests: list[str] | None = None, detector: str = "synthetic") -> RewriteContext:
    """The context the rewriter would build: triage findings, plus one finding suggesting ``suggests``."""
    spec = load_task(task_path(name))
    kclass, findings = triage(spec)
    if suggests:
        findings.append(Finding(id=f"{detector}:-:-", detector=detector, tier="ir", stage="ttgir",
                                message="test evidence", suggests=list(suggests)))
    dtypes, tols = _dtypes_and_tolerances(spec.source)
    return RewriteContext(spec=spec, original=spec, kernel_class=kclass, findings=findings, dtypes=dtypes,
                          tolerances=tols)


def proposals(name: str, family: str, **kw) -> tuple[RewriteContext, list[Proposal]]:
    ctx = make_context(name, [family], **kw)
    props = CATALOG[family].fn(ctx)
    for p in props:
        assert p.family == family
        assert p.motivated_by, "a proposal must say which findings motivated it"
        assert p.prediction, "a proposal must carry a prediction"
        parse_task_source(p.source, "candidate.py")   # still a well-formed task
    return ctx, props


def verify(name: str, source: str, tmp_path: Path, label: str = "cand", full: bool = False) -> None:
    """The candidate against the original task's reference under the interpreter. By default in a plain process, at
    every check shape and dtype of the task with one input draw: what a rewrite test asks (is the rewritten kernel
    right where the task is checked); ``full``: the sandboxed judge with all its checks (seeds, poisoned outputs,
    repeated calls, coverage), 20-60 s a candidate here; the judge itself is tested in tests/cpu/verifier."""
    path = tmp_path / f"{label}.py"
    path.write_text(source)
    if full:
        r = verify_candidate(str(task_path(name)), str(path), label, get_backend("interpreter"))
        assert r.passed, f"{r.klass}: {r.reason}"
        return
    bad = check_light(task_path(name), path)
    assert not bad, bad


#: the light check's program (``check_light``): Triton reads ``TRITON_INTERPRET`` when a kernel is decorated, so it
#: runs in the warm interpreter host (``tests/cpu/tdx_interp.py``), not in the pytest process
_LIGHT = """
import sys
from tritondx.tools.task.module import as_tuple, load_module, norm_shape, to_dtype, tolerance_entries
from tritondx.tools.tune.env import fresh, mismatch, outputs

orig, cand = load_module(sys.argv[1], "orig"), load_module(sys.argv[2], "cand")
for shape in orig.CHECK_SHAPES:
    for dt in orig.DTYPES:
        dtype = to_dtype(dt)
        inputs = as_tuple(orig.make_inputs(norm_shape(shape), dtype, 11, "cpu"))
        refs = outputs(orig.reference(*map(fresh, inputs)))
        bad = mismatch(outputs(cand.launch(*map(fresh, inputs))), refs, tolerance_entries(orig, dtype))
        if bad:
            sys.exit(f"{shape} {dt}: {bad}")
"""


def check_light(task: Path, candidate: Path) -> str:
    """The candidate's outputs against the task's ``reference`` at each check shape and dtype (one draw, the task's
    tolerances, the tune job's comparison: ``tune.env.mismatch``) under the Triton interpreter, in the warm
    interpreter host; "" where equal."""
    from tdx_interp import run_interpreted
    r = run_interpreted(_LIGHT, str(task), str(candidate), timeout=600)
    if r.returncode == 0:
        return ""
    return (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]


def ir_findings(task: Path, out: Path, tier: str = "ir") -> list[Finding]:
    """The task compiled for cuda:90 on CPU (the JIT-faithful capture) and the NVIDIA detectors of ``tier`` run
    on it: how a family test checks that its motivating finding is gone from the candidate's IR."""
    from tritondx.tools.ir.context import load_capture
    import tritondx.tools.ir.detectors  # noqa: F401  (registers the CUDA detectors)
    from tritondx.tools.ir.registry import run_detectors
    from tritondx.tools.task.capture_job import capture_ir
    manifest, err = capture_ir(str(task), out, "cuda:90", per_pass=False, timeout=300)
    assert manifest is not None, err
    return run_detectors(load_capture(out / "manifest.json", task.read_text(), arch=90, source_path=str(task)), tier)


def context_from(name: str, findings: list[Finding]) -> RewriteContext:
    """The context the expert gets for a task whose findings came from a real capture (plus triage's)."""
    spec = load_task(task_path(name))
    kclass, tri = triage(spec)
    dtypes, tols = _dtypes_and_tolerances(spec.source)
    return RewriteContext(spec=spec, original=spec, kernel_class=kclass, findings=tri + list(findings),
                          dtypes=dtypes, tolerances=tols)


def tree(source: str) -> ast.Module:
    return ast.parse(source)


def kernel_names(source: str) -> list[str]:
    return [n.name for n in tree(source).body if isinstance(n, ast.FunctionDef)
            and any("jit" in ast.unparse(d) for d in n.decorator_list)]


def function(source: str, name: str) -> ast.FunctionDef:
    return next(n for n in tree(source).body if isinstance(n, ast.FunctionDef) and n.name == name)


def calls(node: ast.AST, dotted: str) -> list[ast.Call]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Call) and ast.unparse(n.func) == dotted]


@pytest.fixture
def rw():
    """The helpers as one object (tests use --import-mode=importlib, so no conftest imports)."""
    class H:
        pass
    h = H()
    for f in (task_path, make_context, proposals, verify, tree, kernel_names, function, calls, ir_findings,
              context_from, check_light):
        setattr(h, f.__name__, staticmethod(f))
    h.CATALOG = CATALOG
    h.SUITE = SUITE
    h.REPO = REPO
    return h
