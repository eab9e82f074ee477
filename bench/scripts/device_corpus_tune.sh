#!/usr/bin/env bash
# Device (nvidia-h200): the corpus batch with the tuner, sized to end inside one 10-minute call.
# Usage: bash bench/scripts/device_corpus_tune.sh WORKERS DEADLINE_S WALL_BUDGET_S TUNE_BUDGET_S NCU(0|1) [MAX_ROUNDS]
#        [ONLY: task names, comma-separated]
# (carry .whldev .debs .corpus, .whldev linked as .whl there; .corpus is a copy of ../shared/corpus that git ignores. With the committed results the
# tree and all wheels pass the 64 MiB a call may carry: carry a copy of .whl without the wheels the device image
# already holds, made by bench/scripts/device_wheels.sh, linked as .whl there, as session 38 did)
# TASKS=bench/suite runs the project's own suite with the same settings (default TASKS=.corpus); results go to
# $OUT/corpus either way.
source bench/scripts/device_env.sh   # carried debs, wheels, PYTHONPATH
export TRITONDX_FINAL_PROFILE=0 TRITONDX_WALL_BUDGET=$3 TRITONDX_TUNE_BUDGET=$4 TRITONDX_NCU=$5
export TRITONDX_LOCK_DIR=/tmp/tdx-locks
mkdir -p $TRITONDX_LOCK_DIR $OUT/corpus
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
# who holds the device lock while the tune jobs wait for it (batch_g and batch_h_sub16 of 2026-12-05: the tune jobs
# waited 12-46 s each of a 25 s search budget, holding it 54 s shared and 75 s exclusive in all): lock_holds.json
python3 bench/scripts/lock_monitor.py $TRITONDX_LOCK_DIR $OUT/lock_holds.json $(( $2 + 50 )) & monitor=$!
t0=$(date +%s)
BATCH_EXTRA="--max-rounds ${6:-3}" timeout $(( $2 + 45 )) python3 bench/scripts/run_batch.py ${TASKS:-.corpus} $OUT/corpus "$1" "$2" "${7:-}" \
  > $OUT/corpus_batch.log 2>&1
echo "batch wall $(( $(date +%s) - t0 )) s"
kill $monitor 2>/dev/null; wait $monitor 2>/dev/null
python3 -c "import json; d=json.load(open('$OUT/lock_holds.json')); print('timer waiting while shared held', \
d['timer_waiting_while_shared_held_s'], 's of', d['wall_s']); [print(k, v) for k, v in list(d['by_kind'].items())[:8]]" \
  2>/dev/null || echo "no lock_holds.json"
head -60 $OUT/corpus/summary.md 2>/dev/null
cd $OUT/corpus && tar czf ../corpus_runs.tgz --exclude='*.passes.txt' --exclude='*.llir' --exclude='*.sass' \
  --exclude='*.ttgir' --exclude='*.ttir' --exclude='*.ptx' --exclude='checkpoints.sqlite*' --exclude='.locks' \
  --exclude='instrumented_task.py' runs 2>/dev/null && rm -rf runs .locks
ls -la $OUT $OUT/corpus | head -20
