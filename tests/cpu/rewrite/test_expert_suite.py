"""The offline expert over the whole benchmark suite: which families fire where.

Two tables are printed (run with -s to see them):
- triage only: what ``expert.propose`` offers from the source-level findings alone (the CPU-only path);
- every family motivated: where each family's preconditions hold, i.e. what it would offer once the IR,
  compiler and profile tiers supply the findings that motivate it.
"""

from __future__ import annotations

from tritondx.tools.rewrite.expert import propose

EXPECTED = {   # family -> tasks it must apply to (when motivated)
    "fuse_passes": {"l2_layernorm", "l2_rmsnorm", "l2_add_rmsnorm", "l2_add_layernorm", "l2_softmax", "l3_attention",
                    "l3_topk", "l2_groupnorm_swish", "l2_batchnorm", "l2_quantize", "l1_scatter", "l1_index_add",
                    "l2_maxpool2d"},
    "fuse_launches": {"l1_addcmul", "l2_geglu", "l3_matmul_bias_gelu", "l3_quant_matmul", "l2_foreach_add"},
    "split_k": {"l3_skinny_gemm", "l3_matmul"},
    "grouped_ordering": {"l3_matmul", "l3_batched_matmul", "l3_skinny_gemm", "l3_quant_matmul"},
    "vectorize_scalar_loop": {"l2_reduce_sum_mid"},
    "autotune": {"l2_rmsnorm", "l2_softmax", "l2_swiglu", "l1_gather", "l3_skinny_gemm", "l3_grouped_matmul"},
    "index_width": {"l2_groupnorm_swish"},
    "persistent": {"l3_grouped_matmul", "l3_matmul", "l1_add"},
    "launch_config": {"l1_sqrt", "l1_isinf", "l3_matmul", "l3_batched_matmul", "l2_add_rmsnorm", "l3_gemv"},
}


def _table(rows: list[tuple[str, list[str]]], title: str) -> str:
    width = max(len(t) for t, _ in rows)
    lines = [title, "-" * len(title)] + [f"{t:<{width}}  {', '.join(f) if f else '-'}" for t, f in rows]
    return "\n".join(lines)


def test_suite_coverage(rw):
    triage_rows, all_rows = [], []
    fired: dict[str, set[str]] = {}
    for path in sorted(rw.SUITE.glob("*.py")):
        task = path.stem
        ctx = rw.make_context(task)
        ids = {f.id for f in ctx.findings}
        props = propose(ctx, limit=64)
        for p in props:
            assert set(p.motivated_by) <= ids and p.motivated_by
        triage_rows.append((task, sorted({p.family for p in props})))
        everything = rw.make_context(task, list(rw.CATALOG), detector="all_tiers")
        fams = []
        for fam in sorted(rw.CATALOG):
            if rw.CATALOG[fam].fn(everything):
                fams.append(fam)
                fired.setdefault(fam, set()).add(task)
        all_rows.append((task, fams))
    print()
    print(_table(triage_rows, "families proposed from triage findings alone"))
    print()
    print(_table(all_rows, "families whose preconditions hold (every family motivated)"))
    covered = sum(1 for _, f in triage_rows if f)
    assert covered >= 35, f"only {covered} suite tasks get a proposal from triage"
    assert len(rw.CATALOG) >= 12
    for fam, tasks in EXPECTED.items():
        assert tasks <= fired.get(fam, set()), f"{fam} missing on {sorted(tasks - fired.get(fam, set()))}"
    # every family applies somewhere in the suite or, for the patterns the suite does not have, on its own
    # showcase task in bench/families (the Ascend families need the metrics of Ascend findings:
    # tests/cpu/npu/test_ascend_rewrites.py)
    from tritondx.tools.rewrite.ascend import ASCEND_FAMILIES
    for fam in set(rw.CATALOG) - set(fired):
        showcase = rw.REPO / "bench" / "families" / f"{fam}.py"
        if showcase.exists() and rw.CATALOG[fam].fn(rw.make_context(fam, [fam], detector="all_tiers")):
            fired.setdefault(fam, set()).add(f"bench/families/{fam}")
    print({fam: sorted(t) for fam, t in sorted(fired.items())})
    assert set(fired) >= set(rw.CATALOG) - {"tl_dot"} - set(ASCEND_FAMILIES)


def test_tl_dot_example(rw, tmp_path):
    # the suite has no multiply-and-sum product; the example task does (triage finds it)
    ctx = rw.make_context("matmul_no_dot")
    props = rw.CATALOG["tl_dot"].fn(ctx)
    assert props and all(p.family == "tl_dot" for p in props)
    assert rw.calls(rw.function(props[0].source, "matmul_kernel"), "tl.dot")


def test_tl_dot_nothing_when_already_dot(rw):
    assert rw.proposals("l3_matmul", "tl_dot")[1] == []
