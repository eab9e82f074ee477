#!/usr/bin/env bash
# Device (nvidia-h200-x2): the L2-flush test alone, then at once (one lock folder per GPU shared by both):
# (a) the suite's remaining tasks as a Ray batch on the two GPUs (BATCH_RAY=local; Ray from .whl-ray),
# (b) the same suite with --all-tiers on a subset (ALLTIERS_ONLY), for compare_modes.py.
# Usage: bash bench/scripts/device_ray_alltiers.sh RAY_WORKERS ALLTIERS_WORKERS DEADLINE_S
source bench/scripts/device_env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl-ray/*.whl
export TRITONDX_LOCK_DIR=/tmp/tdx-locks RAY_AUTH_MODE=disabled
t0=$(date +%s)
CUDA_VISIBLE_DEVICES=0 timeout 90 python3 -m pytest tests/gpu/verifier/test_gpu_verifier.py -k l2_flush -v -s \
  -o addopts="" -m gpu -p no:cacheprovider > $OUT/l2.txt 2>&1; grep -E "L2 flush|passed|failed" $OUT/l2.txt
mkdir -p $OUT/suite $OUT/alltiers
cp bench/results/suite_state/results.json $OUT/suite/
(BATCH_RAY=local timeout $(( $3 + 90 )) python3 bench/scripts/run_batch.py bench/suite $OUT/suite "$1" "$3" > $OUT/ray.log 2>&1) &
(BATCH_EXTRA=--all-tiers timeout $(( $3 + 90 )) python3 bench/scripts/run_batch.py bench/suite $OUT/alltiers "$2" "$3" \
   "$ALLTIERS_ONLY" > $OUT/alltiers.log 2>&1) &
wait
echo "done: $(( $(date +%s) - t0 )) s"
tail -5 $OUT/ray.log; tail -5 $OUT/alltiers.log
python3 bench/scripts/compare_modes.py $OUT/suite/results.json $OUT/alltiers/results.json $OUT/compare_modes.md | tail -8
python3 -c "
import json; d=json.load(open('$OUT/suite/results.json'))
print('ray meta', d['meta']); print([(r['task'], r.get('gpu'), r.get('node'), r.get('speedup')) for r in d['results'] if r.get('node')])"
rm -f $OUT/suite/report.html $OUT/suite/speedups.png $OUT/alltiers/report.html $OUT/alltiers/speedups.png
cd $OUT && tar czf runs.tgz --exclude='*.passes.txt' --exclude='*.llir' --exclude='*.sass' --exclude='*.ttgir' \
  --exclude='*.ttir' --exclude='*.ptx' --exclude='checkpoints.sqlite*' --exclude='locks' --exclude='.locks' \
  suite/runs alltiers/runs ray.log alltiers.log 2>/dev/null
rm -rf suite/runs alltiers/runs suite/locks alltiers/locks suite/.locks alltiers/.locks ray.log alltiers.log
ls -la $OUT $OUT/suite $OUT/alltiers
