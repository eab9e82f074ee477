#!/usr/bin/env bash
# Device (nvidia-h200): the three-command path on a real library. Liger-Kernel ops on real shapes
# (bench/capture/liger_ops.py --size real: softmax fwd/bwd, cross entropy, rope, RMSNorm fwd/bwd, SwiGLU; bf16)
# are captured (kernels ranked by GPU time share, CUDA events from Triton's launch hooks), the top kernels are
# optimized by `tritondx batch` in oracle mode (the library's own kernel is the reference), and `tritondx apply`
# writes each optimized kernel back as a patch against the installed library file (no git there: patch only).
# Results: $OUT/capture_liger_h200.json (which ops, time share, speedup, rewrite, patch), plus the capture table,
# capture.json, the batch summary and the patches.
# Wheels (no index on the host): bash ../shared/scripts/offline-wheels.sh .whl            (orchestration stack)
#                                bash ../shared/scripts/offline-wheels.sh .whl liger-kernel
# Usage: bash bench/scripts/device_capture.sh [TOP=6] [DEADLINE_S=420]
source bench/scripts/device_env.sh
TOP=${1:-6}
DEADLINE=${2:-420}
TDX="python3 -m tritondx.cli"
t0=$(date +%s)
python3 -c "import liger_kernel, torch, triton; print('liger', getattr(liger_kernel, '__version__', '?'), \
'torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())" | tee $OUT/versions.txt
COLUMNS=160 timeout 300 $TDX capture --out $OUT/captured --top "$TOP" -- \
  python3 bench/capture/liger_ops.py --size real --steps 3 2>&1 | tee $OUT/capture.txt
echo "capture: $(( $(date +%s) - t0 )) s"
timeout $(( DEADLINE + 240 )) $TDX batch $OUT/captured --backend cuda --out $OUT/batch --max-rounds 4 \
  --deadline "$DEADLINE" > $OUT/batch.log 2>&1
tail -5 $OUT/batch.log
echo "batch: $(( $(date +%s) - t0 )) s"
$TDX apply $OUT/batch > $OUT/apply.txt 2>&1; cat $OUT/apply.txt
python3 - "$OUT" <<'PY'
import json, sys, time
from pathlib import Path
out = Path(sys.argv[1])
cap = json.loads((out / "captured" / "capture.json").read_text())
res = {r["task"]: r for r in json.loads((out / "batch" / "results.json").read_text())["results"]} \
    if (out / "batch" / "results.json").exists() else {}
share = {k["kernel"]: k for k in cap["kernels"]}
rows = []
for t in cap["tasks"]:
    stem = Path(t["task"]).stem
    r = res.get(stem, {})
    patch = out / "batch" / "runs" / stem / "apply.patch"
    rows.append({"kernel": t["kernel"], "file": share[t["kernel"]]["file"], "launches": t["launches"],
                 "gpu_time_share": t["share"], "gpu_ms": share[t["kernel"]]["total_ms"],
                 "status": r.get("status"), "speedup": r.get("speedup"), "initial_ms": r.get("initial_ms"),
                 "optimized_ms": r.get("optimized_ms"), "rewrites": r.get("rewrites_applied"),
                 "patch": patch.read_text() if patch.exists() else None})
doc = {"what": "tritondx capture -> batch -> apply on Liger-Kernel ops (bench/capture/liger_ops.py --size real)",
       "date": time.strftime("%Y-%m-%d"), "versions": (out / "versions.txt").read_text().strip(),
       "timing": cap["timing_label"], "all_kernels": cap["kernels"], "skipped": cap["skipped"], "tasks": rows}
(out / "capture_liger_h200.json").write_text(json.dumps(doc, indent=1))
for r in rows:
    sp = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
    print(f"{r['kernel']:<44} share {r['gpu_time_share']:6.1%}  speedup {sp:>7}  {r['rewrites']}  "
          f"patch {'yes' if r['patch'] else 'no'}")
PY
rm -rf $OUT/batch/locks $OUT/batch/.locks
cd $OUT && tar czf batch_runs.tgz --exclude='*.passes.txt' --exclude='*.llir' --exclude='*.sass' --exclude='*.ttgir' \
  --exclude='*.ttir' --exclude='*.ptx' --exclude='checkpoints.sqlite*' batch/runs 2>/dev/null && rm -rf batch/runs
echo "total: $(( $(date +%s) - t0 )) s"; ls -la $OUT
