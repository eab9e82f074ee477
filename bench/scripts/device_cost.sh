#!/usr/bin/env bash
# Device (nvidia-h200): the cost of a corpus batch (issue 16): 8 workers sharing one H200, per-task
# phase seconds, median wall per task, total wall, device-held fraction (the batch samples its lock).
# Before the call the lead copies ../shared/corpus to the ignored folder .corpus/ (carry: .corpus,
# .whl, .debs); bubblewrap comes from a carried deb (the sandbox's read-only file system, which also
# turns on the trusted Triton cache layer).
# Usage: bash bench/scripts/device_cost.sh [WORKERS=8] [DEADLINE_S=480] [ONLY=comma,separated,stems]
set -u
for f in .debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
source bench/scripts/device_env.sh
workers=${1:-8}; deadline=${2:-480}; only=${3:-}
[ -d .corpus ] || { echo "no .corpus/ folder (copy ../shared/corpus there and carry it)"; exit 2; }
echo "bwrap: $(command -v bwrap || echo missing)"
python3 - <<'PY'
from tritondx.tools.exec.sandbox import isolation
from tritondx.tools.exec import triton_cache
i = isolation()
print("isolation:", getattr(i, "mechanism", "?"), "missing:", i.missing, "trusted triton cache:", triton_cache.enabled())
PY
mkdir -p $OUT/cost
t0=$(date +%s)
timeout $(( deadline + 240 )) python3 bench/scripts/run_batch.py .corpus $OUT/cost "$workers" "$deadline" "$only" \
  > $OUT/cost.log 2>&1
echo "batch exit $? after $(( $(date +%s) - t0 )) s"
python3 bench/scripts/cost_summary.py $OUT/cost/results.json .corpus
tail -40 $OUT/cost/summary.md
rm -f $OUT/cost/report.html $OUT/cost/speedups.png
cd $OUT && tar czf cost_runs.tgz --exclude='*.passes.txt' --exclude='*.llir' --exclude='*.sass' --exclude='*.ttgir' \
  --exclude='*.ttir' --exclude='*.ptx' --exclude='checkpoints.sqlite*' --exclude='locks' --exclude='.locks' \
  cost/runs cost.log 2>/dev/null && rm -rf cost/runs cost/locks cost/.locks
ls -la $OUT $OUT/cost
