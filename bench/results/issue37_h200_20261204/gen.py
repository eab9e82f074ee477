import shutil, os
from pathlib import Path
from tritondx.tools.task.spec import load_task
from tritondx.tools.evidence.triage import triage
from tritondx.tools.rewrite.base import RewriteContext, CATALOG
from tritondx.tools.rewrite.expert import propose
from tritondx.tools.evidence.records import Finding
OUT = Path(".bench37")
def ctx_for(path, extra=()):
    spec = load_task(path); k, f = triage(spec)
    return RewriteContext(spec=spec, original=spec, kernel_class=k, findings=f + list(extra), dtypes=["float32"], tolerances={"float32": (1e-5, 1e-5)})
def fake(det, kernel=None, suggests=()):
    return Finding(id=f"{det}:{kernel}:-", detector=det, tier="ir", stage="ttgir", kernel=kernel, message="x", suggests=list(suggests))
jobs = [
  ("tests/cpu/rewrite/kernels/softmax_fixed_programs.py", [], "fuse_passes"),
  ("tests/cpu/rewrite/kernels/softmax_fixed_programs.py", [], "grid_per_item"),
  ("bench/families/grid_per_item.py", [], "grid_per_item"),
  ("bench/families/grid_per_item.py", [], "grid_to_cores"),
  ("bench/families/rows_per_program.py", [fake("tiny_programs", "head_norm_kernel")], "rows_per_program"),
  ("bench/families/flat_tiles.py", [], "flat_tiles"),
  ("bench/families/split_reduction.py", [fake("grid_too_small", "row_rms_kernel")], "split_reduction"),
  ("tests/cpu/rewrite/kernels/output_transpose_copy.py", [], "strided_args"),
  ("tests/cpu/rewrite/kernels/rmsnorm_sentinel.py", [], "fuse_passes"),
  ("/work/shared/corpus/tbg_matmulfree_l2norm.py", [fake("tiny_programs", "_l2_norm_fwd_1pass_kernel")], "rows_per_program"),
  ("/work/shared/corpus/tbg_lightllm_headwise_layernorm.py", [fake("tiny_programs", "_layer_norm_fwd_kernel")], "rows_per_program"),
  ("/work/shared/corpus/tbg_colossalai_kcache_copy.py", [fake("tiny_programs", "_copy_to_kcache_seqlen_n_kernel")], "rows_per_program"),
  ("/work/shared/corpus/tbg_optimize_softmax_online.py", [fake("multi_pass_loops", None, ["fuse_passes"])], "fuse_passes"),
]
lines = []
for path, extra, fam in jobs:
    name = Path(path).stem
    dst = OUT / f"{name}.py"
    shutil.copy(path, dst)
    props = [p for p in CATALOG[fam].fn(ctx_for(path, extra))]
    if fam == "fuse_passes":
        props = [p for p in props if str(p.params.get("template", "")).endswith("_or_original")]
    for i, p in enumerate(props[:2]):
        c = OUT / f"{name}__{fam}{i}.py"
        c.write_text(p.source)
        lines.append(f"{dst.name} {c.name} {str(p.params)[:60].replace(' ', '')}")
(OUT / "pairs.txt").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
