#!/usr/bin/env bash
# Device (nvidia-h200), one call: (1) the GPU tests named in $TESTS (xdist, 3 workers), then (2) at once,
# under one lock folder (exclusive timing across all of them): the corpus batch (issue 16's cost: per-task
# phase seconds, median wall, device-held fraction) and the escalation-vs-all-tiers comparison on suite
# tasks (both modes side by side, so they see the same load).
# Usage: bash bench/scripts/device_cost_modes.sh CORPUS_WORKERS MODE_WORKERS DEADLINE_S MODE_TASKS
# Carry: .corpus (a copy of ../shared/corpus), .whl, .debs.
set -u
for f in .debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" / 2>/dev/null; done
source bench/scripts/device_env.sh
cw=$1; mw=$2; deadline=$3; mtasks=$4
if [ -n "${TESTS:-}" ]; then
  TRITONDX_LIVE_REPORT=$OUT/gpu_live.jsonl PYTHONPATH=$PYTHONPATH:$PWD/bench/scripts TRITONDX_LOCK_DIR=/tmp/tdx-test-locks \
    timeout 100 python3 -m pytest $TESTS -m gpu -q -p no:cacheprovider -p pytest_live -n 3 --timeout 90 -rfE --tb=short \
    > $OUT/gpu_tests.log 2>&1
  echo "tests: $(tail -1 $OUT/gpu_tests.log)"
fi
export TRITONDX_LOCK_DIR=/tmp/tdx-locks
mkdir -p $TRITONDX_LOCK_DIR $OUT/cost $OUT/escalation $OUT/alltiers
python3 -c "from tritondx.tools.exec.sandbox import isolation; i = isolation(); print('isolation', i.mechanism, i.missing)"
t0=$(date +%s)
(timeout $(( deadline + 60 )) python3 bench/scripts/run_batch.py .corpus $OUT/cost "$cw" "$deadline" > $OUT/cost.log 2>&1) &
(timeout $(( deadline + 60 )) python3 bench/scripts/run_batch.py bench/suite $OUT/escalation "$mw" "$deadline" "$mtasks" \
   > $OUT/esc.log 2>&1) &
(BATCH_EXTRA=--all-tiers timeout $(( deadline + 60 )) python3 bench/scripts/run_batch.py bench/suite $OUT/alltiers "$mw" \
   "$deadline" "$mtasks" > $OUT/all.log 2>&1) &
wait
echo "batches done after $(( $(date +%s) - t0 )) s"
python3 bench/scripts/cost_summary.py $OUT/cost/results.json .corpus
head -14 $OUT/cost/summary.md | tail -9
python3 bench/scripts/compare_modes.py $OUT/escalation/results.json $OUT/alltiers/results.json $OUT/compare_modes.md | tail -5
rm -f $OUT/*/report.html $OUT/*/speedups.png
# at most 8 files come back: the results (small) in one archive, the run folders in another
cd $OUT && tar czf runs.tgz --exclude='*.passes.txt' --exclude='*.llir' --exclude='*.sass' --exclude='*.ttgir' \
  --exclude='*.ttir' --exclude='*.ptx' --exclude='checkpoints.sqlite*' --exclude='locks' --exclude='.locks' \
  cost/runs escalation/runs alltiers/runs 2>/dev/null
rm -rf cost/runs escalation/runs alltiers/runs cost/locks cost/.locks escalation/.locks alltiers/.locks
tar czf results.tgz --exclude=runs.tgz cost escalation alltiers compare_modes.* gpu_live.jsonl gpu_tests.log \
  cost.log esc.log all.log 2>/dev/null && rm -rf cost escalation alltiers compare_modes.* gpu_live.jsonl gpu_tests.log \
  cost.log esc.log all.log
ls -la $OUT
