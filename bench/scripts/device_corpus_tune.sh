#!/usr/bin/env bash
# Device (nvidia-h200): the corpus batch with the tuner, sized to end inside one 10-minute call.
# Usage: bash bench/scripts/device_corpus_tune.sh WORKERS DEADLINE_S WALL_BUDGET_S TUNE_BUDGET_S NCU(0|1) [MAX_ROUNDS]
# (carry .whl .debs .corpus; .corpus is a copy of ../shared/corpus that git ignores)
source bench/scripts/device_env.sh   # carried debs, wheels, PYTHONPATH
export TRITONDX_FINAL_PROFILE=0 TRITONDX_WALL_BUDGET=$3 TRITONDX_TUNE_BUDGET=$4 TRITONDX_NCU=$5
export TRITONDX_LOCK_DIR=/tmp/tdx-locks
mkdir -p $TRITONDX_LOCK_DIR $OUT/corpus
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
t0=$(date +%s)
BATCH_EXTRA="--max-rounds ${6:-3}" timeout $(( $2 + 45 )) python3 bench/scripts/run_batch.py .corpus $OUT/corpus "$1" "$2" \
  > $OUT/corpus_batch.log 2>&1
echo "batch wall $(( $(date +%s) - t0 )) s"
head -60 $OUT/corpus/summary.md 2>/dev/null
cd $OUT/corpus && tar czf ../corpus_runs.tgz --exclude='*.passes.txt' --exclude='*.llir' --exclude='*.sass' \
  --exclude='*.ttgir' --exclude='*.ttir' --exclude='*.ptx' --exclude='checkpoints.sqlite*' --exclude='.locks' \
  --exclude='instrumented_task.py' runs 2>/dev/null && rm -rf runs .locks
ls -la $OUT $OUT/corpus | head -20
