#!/usr/bin/env bash
# Device: run the suite batch into $OUT/suite (resuming from bench/results/suite_state/results.json if present).
# Usage: bash bench/scripts/run_suite.sh WORKERS DEADLINE_S [ONLY] [GRACE_S]
source bench/scripts/device_env.sh
mkdir -p $OUT/suite
[ -f bench/results/suite_state/results.json ] && cp bench/results/suite_state/results.json $OUT/suite/
timeout $(( $2 + ${4:-120} )) python3 bench/scripts/run_batch.py bench/suite $OUT/suite "$1" "$2" "${3:-}" 2>&1 | tail -40
cd $OUT/suite && tar czf ../suite_runs.tgz --exclude='*.passes.txt' --exclude='*.llir' --exclude='*.sass' --exclude='*.ttgir' --exclude='*.ttir' --exclude='*.ptx' --exclude='checkpoints.sqlite*' runs && rm -rf runs .locks
ls -la $OUT $OUT/suite
