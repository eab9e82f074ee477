#!/usr/bin/env bash
# Device (nvidia-h200), session 9's cost call (run at 49f30d8): (1) N hardware checks at once with the profiler lock around the
# profiled calls only (bench/scripts/ncu_overlap.py); if any failed, the batch holds it for each ncu process's
# whole life instead; (2) an escalation batch of 8 suite tasks with 8 workers sharing the GPU (one lock folder).
# Usage: bash bench/scripts/device_cost9.sh N_CHECKS DEADLINE_S TASKS   (carry .whl .debs)
for f in .debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" / 2>/dev/null; done
ldconfig -p | grep -q libcap.so.2 || { mkdir -p /tmp/lc && dpkg -x .debs/opt/*.deb /tmp/lc \
  && cp -a /tmp/lc/lib/x86_64-linux-gnu/libcap.so.2* /usr/lib/x86_64-linux-gnu/ && ldconfig; }
source bench/scripts/device_env.sh
export TRITONDX_LOCK_DIR=/tmp/tdx-locks
mkdir -p $TRITONDX_LOCK_DIR
python3 bench/scripts/ncu_overlap.py range "$1" tests/cpu/reliability/tasks/tiny_axpy.py \
  tests/gpu/reliability/candidates/g0_honest.py $OUT/ncu_overlap.json > $OUT/ncu_overlap.log 2>&1
failed=$(python3 -c "import json; print(json.load(open('$OUT/ncu_overlap.json'))['failed'])" 2>/dev/null || echo unknown)
echo "ncu overlap (range lock, $1 checks at once): failed=$failed"
[ "$failed" = 0 ] || export TRITONDX_JOB_NCU_LOCK=process
t0=$(date +%s)
timeout $(( $2 + 40 )) python3 bench/scripts/run_batch.py bench/suite $OUT/esc 8 "$2" "$3" > $OUT/esc.log 2>&1
echo "batch done after $(( $(date +%s) - t0 )) s (ncu lock: ${TRITONDX_JOB_NCU_LOCK:-range})"
python3 bench/scripts/timelines.py $OUT/esc/runs > $OUT/timelines.md 2>&1
grep -h "hardware_check" $OUT/esc/runs/*/log.jsonl | grep -c "confirmed\": true" | sed 's/^/hardware checks confirmed: /'
head -30 $OUT/esc/summary.md
rm -f $OUT/esc/report.html $OUT/esc/speedups.png
cd $OUT && tar czf runs.tgz --exclude='*.passes.txt' --exclude='*.llir' --exclude='*.sass' --exclude='*.ttgir' \
  --exclude='*.ttir' --exclude='*.ptx' --exclude='checkpoints.sqlite*' --exclude='locks' --exclude='.locks' \
  esc/runs esc.log ncu_overlap.log 2>/dev/null && rm -rf esc/runs esc.log ncu_overlap.log
