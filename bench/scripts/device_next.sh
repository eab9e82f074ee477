#!/usr/bin/env bash
# Device, next session (nvidia-h200-x2): measure what landed after the 2026-11-30 suite run, in one call.
# GPU 0: the GPU tests alone, then the tasks whose search changed (paired-round rule: l2_foreach_add;
# gather launch space and pool tiles: l2_maxpool2d, l2_avgpool2d; top-k lanes: l3_topk) as a fresh batch.
# GPU 1: escalation vs all tiers at once on 8 tasks (device_modes.sh pins itself to what it sees).
# Usage: bash bench/scripts/device_next.sh TESTS_S DEADLINE_S
source bench/scripts/device_env.sh
t0=$(date +%s)
(
  export CUDA_VISIBLE_DEVICES=0 TRITONDX_LOCK_DIR=/tmp/tdx-locks0
  timeout "$1" python3 -m pytest tests/gpu -v -o addopts="" -m gpu -p no:cacheprovider -rs > $OUT/gpu_tests.txt 2>&1
  tail -3 $OUT/gpu_tests.txt
  mkdir -p $OUT/changed
  timeout $(( $2 + 120 )) python3 bench/scripts/run_batch.py bench/suite $OUT/changed 4 "$2" \
    l2_foreach_add,l2_maxpool2d,l2_avgpool2d,l3_topk > $OUT/changed.log 2>&1
  echo "gpu0 done: $(( $(date +%s) - t0 )) s"
) > $OUT/gpu0.log 2>&1 &
(
  export CUDA_VISIBLE_DEVICES=1
  OUT=$OUT/modes bash -c "mkdir -p \$OUT && bash bench/scripts/device_modes.sh 4 $2 \
    l1_sqrt,l1_isinf,l2_layernorm,l2_geglu,l3_gemv,l2_reduce_sum_mid,l1_add,l2_swiglu"
) > $OUT/gpu1.log 2>&1 &
wait
cat $OUT/gpu0.log; tail -12 $OUT/gpu1.log; tail -12 $OUT/changed/summary.md 2>/dev/null
rm -f $OUT/changed/report.html $OUT/changed/speedups.png
cd $OUT && tar czf changed_runs.tgz --exclude='*.passes.txt' --exclude='*.llir' --exclude='*.sass' --exclude='*.ttgir' \
  --exclude='*.ttir' --exclude='*.ptx' --exclude='checkpoints.sqlite*' --exclude='locks' --exclude='.locks' \
  changed/runs changed.log gpu0.log gpu1.log 2>/dev/null && rm -rf changed/runs changed/locks changed.log
ls -la $OUT $OUT/changed $OUT/modes
