#!/usr/bin/env bash
# Device: the GPU test folders (tests/gpu), in parallel (xdist; the image has pytest-xdist and
# pytest-timeout), every device job under one lock folder so timing stays exclusive across workers.
# Each test's result lands in $OUT/gpu_live.jsonl as it ends (bench/scripts/pytest_live.py).
# Usage: bash bench/scripts/device_gpu_tests.sh WORKERS LIMIT_S [pytest selection...]   (carry .whl .debs)
for f in .debs/*.deb; do dpkg -x "$f" / 2>/dev/null; done
source bench/scripts/device_env.sh
workers=$1; limit=$2; shift 2
export TRITONDX_LOCK_DIR=/tmp/tdx-test-locks TRITONDX_LIVE_REPORT=$OUT/gpu_live.jsonl PYTHONPATH=$PYTHONPATH:$PWD/bench/scripts
mkdir -p $TRITONDX_LOCK_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
echo "bwrap: $(command -v bwrap || echo missing)"
t0=$(date +%s)
timeout $limit python3 -m pytest "${@:-tests/gpu}" -m gpu -q -p no:cacheprovider -p pytest_live -n "$workers" \
  --timeout 400 -rfEs --tb=short --durations=50 > $OUT/gpu_tests.log 2>&1
echo "pytest exit $? after $(( $(date +%s) - t0 )) s"
tail -60 $OUT/gpu_tests.log
