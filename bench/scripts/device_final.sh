#!/usr/bin/env bash
# Device: one call that runs, in order, the GPU tests alone (timing-sensitive), then at once the
# bundled examples (with final ncu profiles), the rewrite-family showcase and more of the suite, all
# sharing one device lock so that every timing still has the GPU alone. Eight files come back.
# Usage: bash bench/scripts/device_final.sh TESTS_S PHASE2_S SUITE_WORKERS FAMILY_JOBS
# Environment: EXAMPLES (example files to run; default all), FAMILIES_ONLY (comma-separated families;
# default all), TESTS (pytest paths; default tests/gpu). TESTS_S=0 skips the tests.
source bench/scripts/device_env.sh
export TRITONDX_LOCK_DIR=/tmp/tdx-locks
t0=$(date +%s)
[ "$1" -gt 0 ] && timeout "$1" python3 -m pytest ${TESTS:-tests/gpu} -v -o addopts="" -m gpu -p no:cacheprovider -rs > $OUT/gpu_tests.txt 2>&1
echo "gpu tests: $(( $(date +%s) - t0 )) s"; tail -5 $OUT/gpu_tests.txt
p2=$2
(timeout "$p2" python3 bench/scripts/run_examples.py $OUT/ex ${EXAMPLES:-} > $OUT/ex.log 2>&1) &
(timeout "$p2" python3 bench/scripts/run_families.py $OUT/families --jobs "$4" --timeout $(( p2 - 30 )) \
   --deadline $(( p2 - 60 )) --results bench/results ${FAMILIES_ONLY:+--only $FAMILIES_ONLY} > $OUT/fam.log 2>&1) &
(bash bench/scripts/run_suite.sh "$3" $(( p2 / 2 )) "" $(( p2 / 2 - 20 )) > $OUT/suite.log 2>&1) &
wait
echo "phase 2 done: $(( $(date +%s) - t0 )) s"
cp $OUT/ex/examples.json $OUT/ 2>/dev/null
mv $OUT/families/families.json $OUT/families/families.md $OUT/ 2>/dev/null
rm -f $OUT/suite/report.html $OUT/suite/speedups.png
cd $OUT && tar czf runs.tgz --exclude='*.passes.txt' --exclude='*.llir' --exclude='*.sass' --exclude='*.ttgir' \
  --exclude='*.ttir' --exclude='*.ptx' --exclude='checkpoints.sqlite*' --exclude='.locks' \
  ex families suite_runs.tgz ex.log fam.log suite.log 2>/dev/null
rm -rf ex families suite_runs.tgz ex.log fam.log suite.log
tail -3 $OUT/examples.json 2>/dev/null; cat $OUT/families.md 2>/dev/null | head -30; tail -30 $OUT/suite/summary.md
ls -la $OUT $OUT/suite
