"""Issue 37 over the corpus (../shared/corpus, read from there; skipped when absent): every corpus kernel whose
findings name one of the issue's patterns gets a candidate from the matching family.

- Patterns named at triage (the source says it: a program count sized for another device, a flat index split
  into a 2-D walk, multiply-and-sum products, a wrapper copy): every corpus task with such a finding must get at
  least one candidate from a matching family.
- Symptoms named by the IR tier (cuda:90 compiled on CPU at the task's benchmark size: ``tiny_programs``,
  ``grid_too_small``, ``uncoalesced_access``) have several causes, and the families take only the ones they
  know; the table of which family proposed on which kernel is printed, and the kernels reached on 2026-12-04
  (REACHED) must stay reached.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from tritondx.tools.evidence.triage import triage
from tritondx.tools.rewrite.base import RewriteContext
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.task.spec import load_task

CORPUS = Path(__file__).resolve().parents[4] / "shared" / "corpus"
#: detector -> families that answer it
NAMED = {"fixed_program_count": {"grid_per_item", "grid_to_cores"}, "flat_index_2d": {"flat_tiles"},
         "mul_sum_dot": {"tl_dot"}, "wrapper_copy": {"strided_args"}}
SYMPTOMS = {"tiny_programs": {"rows_per_program"},
            "grid_too_small": {"grid_per_item", "split_reduction", "grid_to_cores", "split_k", "persistent"},
            "uncoalesced_access": {"flat_tiles", "tile_2d"}}
#: (task, family) reached on 2026-12-04: tiny programs of one row/token each, made several rows per program
REACHED = {("tbg_colossalai_kcache_copy", "rows_per_program"), ("tbg_lightllm_headwise_layernorm", "rows_per_program"),
           ("tbg_matmulfree_l2norm", "rows_per_program")}


def _ir(task: Path) -> list:
    from tritondx.tools.ir.context import load_capture
    import tritondx.tools.ir.detectors  # noqa: F401  (registers the CUDA detectors)
    from tritondx.tools.ir.registry import run_detectors
    from tritondx.tools.task.capture_job import capture_ir
    with tempfile.TemporaryDirectory() as d:
        manifest, _ = capture_ir(str(task), Path(d), "cuda:90", per_pass=False, timeout=300)
        if manifest is None:
            return []
        return run_detectors(load_capture(Path(d) / "manifest.json", task.read_text(), arch=90,
                                          source_path=str(task)), "ir")


TASKS = sorted(CORPUS.glob("tbg_*.py")) if CORPUS.is_dir() else []


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus not present")
@pytest.mark.parametrize("task", TASKS, ids=[t.stem for t in TASKS])
def test_corpus_kernels_get_the_matching_family(task):
    """One corpus task per test (spread over the workers): every named pattern answered by a matching family, and
    the (task, family) pairs in REACHED for this task still reached."""
    rows, missing, reached = [], [], set()
    spec = load_task(task)
    kclass, found = triage(spec)
    found += [f for f in _ir(task) if f.detector in SYMPTOMS]
    hits = [f for f in found if f.detector in NAMED or f.detector in SYMPTOMS]
    if hits:
        ctx = RewriteContext(spec=spec, original=spec, kernel_class=kclass, findings=found, dtypes=["float32"],
                             tolerances={"float32": (1e-5, 1e-5)})
        fams = {p.family for p in propose(ctx, limit=16)}
        for f in hits:
            want = NAMED.get(f.detector) or SYMPTOMS[f.detector]
            got = sorted(want & fams)
            rows.append(f"{task.stem:40} {f.detector:22} {f.kernel or '-':40} {', '.join(got) or 'nothing'}")
            reached |= {(task.stem, g) for g in got}
            if f.detector in NAMED and not got:
                missing.append(f"{task.stem}: {f.detector} ({f.kernel}) got none of {sorted(want)}")
    print("\n" + "\n".join(rows))
    assert not missing, missing
    want_here = {r for r in REACHED if r[0] == task.stem}
    assert want_here <= reached, sorted(want_here - reached)


def test_every_reached_pair_names_a_corpus_task():
    """REACHED is checked task by task above: a pair whose task is not in the corpus would never be checked."""
    if TASKS:
        assert {t for t, _ in REACHED} <= {t.stem for t in TASKS}
