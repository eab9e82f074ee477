#!/usr/bin/env bash
# Device (nvidia-h200-x2): GPU 0 runs the GPU tests alone, then the examples and the rewrite-family
# showcase (sharing GPU 0's lock); GPU 1 meanwhile runs more of the suite (its own lock). Each GPU's
# timings still hold that GPU alone; only host CPUs are shared.
# Usage: bash bench/scripts/device_x2.sh TESTS_S PHASE2_S SUITE_WORKERS SUITE_DEADLINE_S FAMILY_JOBS
# Environment: EXAMPLES, FAMILIES_ONLY, TESTS (as device_final.sh), SUITE_ONLY (comma-separated tasks).
source bench/scripts/device_env.sh
nvidia-smi -L
t0=$(date +%s)
(
  export CUDA_VISIBLE_DEVICES=0 TRITONDX_LOCK_DIR=/tmp/tdx-locks0
  if [ "$1" -gt 0 ]; then
    timeout "$1" python3 -m pytest ${TESTS:-tests/gpu} -v -o addopts="" -m gpu -p no:cacheprovider -rs > $OUT/gpu_tests.txt 2>&1
    echo "gpu tests: $(( $(date +%s) - t0 )) s"; tail -5 $OUT/gpu_tests.txt
  fi
  p2=$2
  if [ "$p2" -gt 0 ]; then
    (timeout "$p2" python3 bench/scripts/run_examples.py $OUT/ex ${EXAMPLES:-} > $OUT/ex.log 2>&1) &
    (timeout "$p2" python3 bench/scripts/run_families.py $OUT/families --jobs "$5" --timeout $(( p2 - 30 )) \
       --deadline $(( p2 - 60 )) --results bench/results ${FAMILIES_ONLY:+--only $FAMILIES_ONLY} > $OUT/fam.log 2>&1) &
    wait
  fi
  echo "gpu0 done: $(( $(date +%s) - t0 )) s"
) > $OUT/gpu0.log 2>&1 &
(
  export CUDA_VISIBLE_DEVICES=1 TRITONDX_LOCK_DIR=/tmp/tdx-locks1
  [ "$3" -gt 0 ] && bash bench/scripts/run_suite.sh "$3" "$4" "${SUITE_ONLY:-}" 60
  echo "gpu1 done: $(( $(date +%s) - t0 )) s"
) > $OUT/suite.log 2>&1 &
wait
echo "all done: $(( $(date +%s) - t0 )) s"
cat $OUT/gpu0.log
cp $OUT/ex/examples.json $OUT/ 2>/dev/null
mv $OUT/families/families.json $OUT/families/families.md $OUT/ 2>/dev/null
rm -f $OUT/suite/report.html $OUT/suite/speedups.png
cd $OUT && tar czf runs.tgz --exclude='*.passes.txt' --exclude='*.llir' --exclude='*.sass' --exclude='*.ttgir' \
  --exclude='*.ttir' --exclude='*.ptx' --exclude='checkpoints.sqlite*' --exclude='.locks' \
  ex families suite_runs.tgz ex.log fam.log suite.log gpu0.log 2>/dev/null
rm -rf ex families suite_runs.tgz ex.log fam.log suite.log gpu0.log
tail -3 examples.json 2>/dev/null; head -30 families.md 2>/dev/null; tail -40 suite/summary.md 2>/dev/null
ls -la $OUT $OUT/suite
