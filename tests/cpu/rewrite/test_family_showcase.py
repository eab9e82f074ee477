"""Every rewrite family has a showcase task on which the offline expert proposes it from real evidence.

The tasks are bench/scripts/run_families.py's FAMILY_TASKS (bench/families/ plus a few examples and suite
tasks). For each one the findings come from the tier that motivates the family: triage (the source),
the IR tier or the compiler tier (a real sandboxed capture for cuda:90, as the ir_analyst and
compiler_expert nodes do), or, for grouped_ordering, the profile tier's roofline detector on a
plausible H200 measurement of the task (no GPU here). The family must be among the first
``CANDIDATES`` proposals (one rewrite round of run_families.py), motivated by a finding of that tier.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import pytest
from tritondx.tools.evidence.analysis import analyze_tier
from tritondx.tools.evidence.profiler import roofline_findings
from tritondx.tools.rewrite.expert import propose

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("run_families", REPO / "bench" / "scripts" / "run_families.py")
run_families = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_families)
FAMILY_TASKS = run_families.FAMILY_TASKS
CANDIDATES = 8   # run_families.py --candidates default

#: family -> the tier whose finding proposes it on its showcase task
TIER = {
    "launch_config": "triage", "tl_dot": "triage", "fuse_passes": "triage", "fuse_launches": "triage",
    "vectorize_scalar_loop": "triage", "autotune": "triage",
    "split_k": "ir", "persistent": "ir", "mask_removal": "ir", "index_width": "ir", "alignment_hints": "ir",
    "pipelining": "compiler", "grouped_ordering": "profile",
    "strided_args": "triage", "cheap_math": "triage", "grid_to_cores": "triage", "causal_split": "triage",
    "autotune_widen": "triage", "tile_2d": "ir",
    "grid_per_item": "triage", "flat_tiles": "triage", "rows_per_program": "ir", "split_reduction": "ir",
    "absmax_norm": "triage", "clone_fold": "triage", "deinterleave": "triage",
}


def _profile_findings(task: Path):
    # 8192^3 fp16 GEMM at 1.8 ms: 611 TFLOP/s, 76% of the 802 TFLOP/s measured on the H200
    # (bench/results/ceilings_h200_20261130.json); below 80% the roofline detector suggests GEMM rewrites
    shape, flops = [8192, 8192, 8192], 2 * 8192 ** 3
    bench = {"ceilings": {"copy_bytes_per_s": 4.221e12, "matmul_flops_per_s": {"bf16": 8.02e14, "tf32": 4.16e14}},
             "shapes": [{"shape": shape, "dtype": "torch.float16", "bytes": 3 * 8192 * 8192 * 2, "flops": flops,
                         "floor_ms": flops / 8.02e14 * 1e3,
                         "variants": {"initial": {"median_ms": 1.8, "spread": 0.01,
                                                  "roofline_fraction": flops / 8.02e14 / 1.8e-3}}}]}
    return roofline_findings(bench, "initial")


def _context(family: str):
    ctx = make_context(FAMILY_TASKS[family])
    tier = TIER[family]
    task = REPO / FAMILY_TASKS[family]
    if tier in ("ir", "compiler"):
        with tempfile.TemporaryDirectory() as d:
            found, _, note = analyze_tier(tier, str(task), "cuda:90", Path(d), 0)
        assert found, f"no {tier} findings for {task.name}: {note}"
        ctx.findings += found
    elif tier == "profile":
        ctx.findings += _profile_findings(task)
    return ctx


def make_context(rel: str):
    import ast

    from tritondx.tools.rewrite.base import RewriteContext
    from tritondx.tools.task.spec import load_task
    from tritondx.tools.evidence.triage import triage
    spec = load_task(REPO / rel)
    kclass, findings = triage(spec)
    dtypes, tols = [], {}
    for node in ast.parse(spec.source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "DTYPES":
                dtypes = [ast.unparse(e).replace("torch.", "") for e in node.value.elts]
            if node.targets[0].id == "TOLERANCE" and isinstance(node.value, ast.Dict):
                for k, v in zip(node.value.keys, node.value.values):
                    t = ast.literal_eval(v)
                    tols[ast.unparse(k).replace("torch.", "").strip("'\"")] = (t["atol"], t["rtol"])
    return RewriteContext(spec=spec, original=spec, kernel_class=kclass, findings=findings, dtypes=dtypes,
                          tolerances=tols)


def test_every_family_has_a_showcase():
    from tritondx.tools.rewrite.ascend import ASCEND_FAMILIES
    from tritondx.tools.rewrite.base import CATALOG
    # the Ascend families are shown end to end in tests/cpu/npu/test_ascend_rewrites.py (their findings
    # come only from the Ascend detectors; run_families.py measures CUDA families)
    assert set(FAMILY_TASKS) == set(CATALOG) - set(ASCEND_FAMILIES) == set(TIER)
    for fam, rel in FAMILY_TASKS.items():
        assert (REPO / rel).exists(), rel
    # bench/families holds one task per family that has no showcase elsewhere
    own = {p.stem for p in (REPO / "bench" / "families").glob("*.py")}
    assert own == {f for f, rel in FAMILY_TASKS.items() if rel.startswith("bench/families/")}


def _check(family: str):
    from tritondx.tools.rewrite.base import CATALOG
    ctx = _context(family)
    # a batch family (the launch search) emits its batch only where a device times it
    ctx.can_time = CATALOG[family].batch
    props = propose(ctx, limit=CANDIDATES)
    fams = [p.family for p in props]
    assert family in fams, f"{FAMILY_TASKS[family]}: first {CANDIDATES} proposals are {fams}"
    tiers = {f.id: f.tier for f in ctx.findings}
    p = next(p for p in props if p.family == family)
    assert TIER[family] in {tiers[i] for i in p.motivated_by}, \
        f"{family} motivated by {p.motivated_by}, none from the {TIER[family]} tier"


@pytest.mark.parametrize("family", sorted(f for f, t in TIER.items() if t in ("triage", "profile")))
def test_source_and_profile_families(family):
    _check(family)


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(f for f, t in TIER.items() if t in ("ir", "compiler")))
def test_ir_and_compiler_families(family):
    _check(family)
