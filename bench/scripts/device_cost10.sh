#!/usr/bin/env bash
# Device (nvidia-h200): the hardware check's preloaded ncu runners, then a batch with them.
# (1) N hardware checks at once, each ncu runner holding the profiler lock for its whole life (MODE=whole), then
#     the same with preloaded runners (MODE=preload: Python, torch and Triton start outside the lock;
#     bench/scripts/ncu_overlap.py): failures, retries, and the lock-held seconds a batch's checks queue on;
# (2) a batch of the given suite or corpus tasks with WORKERS workers sharing the GPU (one lock folder), preloaded.
# Usage: bash bench/scripts/device_cost10.sh N_CHECKS SUITE WORKERS DEADLINE_S [TASKS]   (carry .whl .debs [.corpus])
# N_CHECKS 0: the batch alone. bench/scripts/lock_monitor.py records the device lock's holds meanwhile (lock_holds.json).
source bench/scripts/device_env.sh   # carried debs, wheels, PYTHONPATH
export TRITONDX_LOCK_DIR=/tmp/tdx-locks
mkdir -p $TRITONDX_LOCK_DIR
for mode in $( [ "$1" -gt 0 ] && echo whole preload ); do
  python3 bench/scripts/ncu_overlap.py $mode "$1" tests/cpu/reliability/tasks/tiny_axpy.py \
    tests/gpu/reliability/candidates/g0_honest.py $OUT/ncu_$mode.json > $OUT/ncu_$mode.log 2>&1
  python3 -c "import json; d=json.load(open('$OUT/ncu_$mode.json')); print('$mode', {k: d[k] for k in \
('checks', 'failed', 'wall_s', 'lock_held_s', 'outside_lock_s', 'preloaded_parts', 'parts')})" 2>&1 | tail -1
done
python3 bench/scripts/lock_monitor.py $TRITONDX_LOCK_DIR $OUT/lock_holds.json $(( $4 + 90 )) & monitor=$!
t0=$(date +%s)
timeout $(( $4 + 60 )) python3 bench/scripts/run_batch.py "$2" $OUT/batch "$3" "$4" "${5:-}" > $OUT/batch.log 2>&1
echo "batch done after $(( $(date +%s) - t0 )) s"
kill $monitor; wait $monitor
python3 -c "import json; d=json.load(open('$OUT/lock_holds.json')); print('timer waiting while shared held', \
d['timer_waiting_while_shared_held_s'], 's of', d['wall_s']); [print(k, v) for k, v in list(d['by_kind'].items())[:12]]"
python3 bench/scripts/timelines.py $OUT/batch/runs > $OUT/timelines.md 2>&1
python3 bench/scripts/cost_summary.py $OUT/batch/results.json "$2" > $OUT/cost_summary.md 2>&1; tail -25 $OUT/cost_summary.md
head -30 $OUT/batch/summary.md
rm -f $OUT/batch/report.html $OUT/batch/speedups.png
cd $OUT && tar czf runs.tgz --exclude='*.passes.txt' --exclude='*.llir' --exclude='*.sass' --exclude='*.ttgir' \
  --exclude='*.ttir' --exclude='*.ptx' --exclude='checkpoints.sqlite*' --exclude='locks' --exclude='.locks' \
  batch/runs batch.log ncu_whole.log ncu_preload.log 2>/dev/null && rm -rf batch/runs batch.log ncu_*.log
