#!/usr/bin/env bash
# Device: exercise the launch-space search (tools/rewrite/launch_search.py) on corpus tasks whose launches sit
# below launch(). Each task runs 2 rounds on the GPU; every round's search records (emitted / pruned / over budget,
# with ptxas figures) land in <run>/candidates/launch_search_rN.json and the bench job times the emitted
# configurations side by side. Usage: bash bench/scripts/device_launch_search.sh CORPUS_DIR [BUDGET_S] [TASKS]
source bench/scripts/device_env.sh
corpus=${1:?corpus folder}
export TRITONDX_SEARCH_BUDGET=${2:-30}
tasks=${3:-tbg_triton_matmul_fp16,tbg_flaggems_bmm,tbg_slora_rmsnorm_fused,tbg_unsloth_rms_layernorm,tbg_vmamba_swiglu_fwd,tbg_2by4_masked_add}
mkdir -p $OUT/search
for t in ${tasks//,/ }; do
  timeout 900 python3 -m tritondx.cli optimize "$corpus/$t.py" --backend cuda --max-rounds 2 \
    --out $OUT/search/$t > $OUT/search/$t.log 2>&1
  echo "$t rc=$? $(grep -o 'best: .*' $OUT/search/$t.log | head -1)"
  python3 - "$OUT/search/$t" <<'PY'
import json, pathlib, sys
run = pathlib.Path(sys.argv[1])
for f in sorted(run.glob("candidates/launch_search_r*.json")):
    recs = json.load(open(f))
    by = {}
    for r in recs:
        by[r["status"]] = by.get(r["status"], 0) + 1
    print(f"  {f.name}: {len(recs)} configurations {by}")
PY
done
cd $OUT && tar czf search_runs.tgz --exclude='*.passes.txt' --exclude='*.llir' --exclude='*.sass' --exclude='*.ttgir' \
  --exclude='*.ttir' --exclude='*.ptx' --exclude='checkpoints.sqlite*' search && rm -rf search
