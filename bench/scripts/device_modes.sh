#!/usr/bin/env bash
# Device: escalation on need vs every tier on every task, in the same run: the two batches run at once
# on the same tasks and the same GPUs (one lock folder per GPU shared by both), so they see the same load;
# then compare_modes.py (device seconds = seconds the jobs held the device, not their wall time).
# Usage: bash bench/scripts/device_modes.sh WORKERS_PER_GPU DEADLINE_S TASKS(comma-separated)   (carry .whl .debs)
for f in .debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" / 2>/dev/null; done
source bench/scripts/device_env.sh
export TRITONDX_LOCK_DIR=/tmp/tdx-locks
t0=$(date +%s)
mkdir -p $OUT/escalation $OUT/alltiers
(timeout $(( $2 + 120 )) python3 bench/scripts/run_batch.py bench/suite $OUT/escalation "$1" "$2" "$3" > $OUT/esc.log 2>&1) &
(BATCH_EXTRA=--all-tiers timeout $(( $2 + 120 )) python3 bench/scripts/run_batch.py bench/suite $OUT/alltiers "$1" "$2" "$3" \
   > $OUT/all.log 2>&1) &
wait
echo "done: $(( $(date +%s) - t0 )) s"
python3 bench/scripts/compare_modes.py $OUT/escalation/results.json $OUT/alltiers/results.json $OUT/compare_modes.md | tail -8
rm -f $OUT/*/report.html $OUT/*/speedups.png
cd $OUT && tar czf runs.tgz --exclude='*.passes.txt' --exclude='*.llir' --exclude='*.sass' --exclude='*.ttgir' \
  --exclude='*.ttir' --exclude='*.ptx' --exclude='checkpoints.sqlite*' --exclude='locks' --exclude='.locks' \
  escalation/runs alltiers/runs esc.log all.log 2>/dev/null
rm -rf escalation/runs alltiers/runs escalation/locks alltiers/locks esc.log all.log
ls -la $OUT $OUT/escalation $OUT/alltiers
