#!/usr/bin/env bash
# Device: bench/scripts/baselines_warmup.py on some corpus tasks (carry .whl .debs .corpus).
# Usage: bash bench/scripts/device_baselines_warmup.sh TASK_STEM...
source bench/scripts/device_env.sh
export TRITONDX_LOCK_DIR=/tmp/tdx_locks
mkdir -p $TRITONDX_LOCK_DIR
python3 bench/scripts/baselines_warmup.py $OUT/baselines_warmup.json $(for t in "$@"; do echo .corpus/$t.py; done) 2>&1 | tail -40
