#!/usr/bin/env bash
# Device: where the time of one task goes, with nothing else on the GPU: a cProfile of the judge's full
# verification of each task's original (profile_verify.py), then the tasks optimized by a batch of
# WORKERS (escalation mode), with per-node timelines.
# Usage: bash bench/scripts/device_profile.sh WORKERS DEADLINE_S TASKS(comma-separated)   (carry .whl .debs)
for f in .debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" / 2>/dev/null; done
source bench/scripts/device_env.sh
export TRITONDX_LOCK_DIR=/tmp/tdx-locks
t0=$(date +%s)
paths=$(echo "$3" | tr ',' '\n' | sed 's#^#bench/suite/#; s#$#.py#' | tr '\n' ' ')
(cd /tmp && timeout 240 python3 "$OLDPWD/bench/scripts/profile_verify.py" $OUT/profile_verify.json $(for p in $paths; do echo "$OLDPWD/$p"; done)) \
  > $OUT/profile.log 2>&1
echo "profile done: $(( $(date +%s) - t0 )) s"; grep '^{' $OUT/profile.log
timeout $(( $2 + 90 )) python3 bench/scripts/run_batch.py bench/suite $OUT/batch "$1" "$2" "$3" > $OUT/batch.log 2>&1
echo "batch done: $(( $(date +%s) - t0 )) s"
python3 bench/scripts/timelines.py $OUT/batch/runs > $OUT/timelines.md 2>&1
python3 - "$OUT/batch/results.json" <<'PY'
import json, sys
for t in json.load(open(sys.argv[1]))["results"]:
    print(t["task"], t["status"], t.get("speedup"), round(t.get("wall_s") or 0),
          {k[len("phase:"):]: v for k, v in (t.get("cost") or {}).items() if k.startswith("phase:")})
PY
rm -rf $OUT/batch/runs/*/ir $OUT/batch/runs/*/checkpoints.sqlite* $OUT/batch/locks $OUT/batch/.locks
cd $OUT && tar czf batch.tgz batch batch.log profile.log 2>/dev/null && rm -rf batch batch.log
ls -la $OUT
