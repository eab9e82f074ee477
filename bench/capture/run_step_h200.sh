#!/usr/bin/env bash
# Bring your own program, end to end on a GPU (issue 35): a Llama-style training step built from Liger-Kernel's
# Triton kernels (bench/capture/step.py) is captured, its hot kernels optimized in oracle mode, the verified faster
# ones patched into a copy of the library, and the step timed before and after side by side in one process with
# its outputs (loss, every gradient) compared.
#
#   1. the installed liger_kernel is copied to $WORK/lib/liger_kernel (a git repository: apply commits there);
#   2. tritondx capture --top $TOP -- python3 bench/capture/step.py --size $SIZE  (the copy first on PYTHONPATH,
#      so the captured kernels' files are the copy's): kernels ranked by GPU time, one oracle task per hot kernel;
#   3. tritondx batch (--deadline: whatever is left of $TOTAL_S after capture, less $RESERVE_S for steps 4-5);
#   4. tritondx apply --commit (--write where git is missing): the verified faster kernels written into the copy;
#   5. bench/capture/bench_step.py: the copy loaded as `liger_kernel_patched` next to the installed liger_kernel in
#      one process; step time before/after (CUDA events, interleaved rounds), outputs compared, each kernel's own
#      time in the step before/after (torch.profiler) with its share of the step, and Amdahl's prediction.
#
# Results (flat, at most 8 files, so all of them come back from $OUT): step_$SIZE.json / step_$SIZE.md (the
# before/after table), capture.json, batch_summary.md, batch_results.json, apply_all.patch, run.log.
#
# On the H200: one command of at most TOTAL_S (540 s, counted from the script's start, the wheels' install
# included) plus a minute's slack, so timeout_s=600 holds it: ~1-2 min install and capture, the batch gets what is
# left less RESERVE_S (150 s) for apply and the bench (~1-2 min: both libraries compiled, the PyTorch reference,
# 6 rounds x 10 steps each, one profiled step set each). Wheels as for bench/scripts/device_capture.sh, with
# liger-kernel among them (run's carry: .whl):
#   bash bench/capture/run_step_h200.sh                    # results into $OUT
#   bash bench/capture/run_step_h200.sh bench/results/capture_h200_<date>
# Settings (environment): SIZE=h200 TOP=5 WORKERS=5 MAX_ROUNDS=2 TOTAL_S=540 RESERVE_S=150 STEPS=3 BACKEND=cuda
#   WORK=runs/capture_step_<size> DEVICE_ENV=bench/scripts/device_env.sh (none: use this environment) PYTHON=python3
#   ACCEPT_UNMEASURED=1 (CPU: take verified candidates unmeasured) BENCH_ARGS="--steps 10 --rounds 6"
# On a CPU (tests/cpu/capture/test_step.py): SIZE=tiny BACKEND=interpreter TRITON_INTERPRET=1 DEVICE_ENV=none ...
set -u -o pipefail
t0=$(date +%s)
cd "$(dirname "$0")/../.."
RESULTS=${1:-${OUT:-bench/results/capture_h200_$(date +%Y%m%d)}}
SIZE=${SIZE:-h200}
BACKEND=${BACKEND:-cuda}
TOP=${TOP:-5}
WORKERS=${WORKERS:-5}
MAX_ROUNDS=${MAX_ROUNDS:-2}
TOTAL_S=${TOTAL_S:-540}
RESERVE_S=${RESERVE_S:-150}
STEPS=${STEPS:-3}
WORK=${WORK:-runs/capture_step_$SIZE}
DEVICE_ENV=${DEVICE_ENV:-bench/scripts/device_env.sh}
BENCH_ARGS=${BENCH_ARGS:-}
ACCEPT=${ACCEPT_UNMEASURED:+--accept-unmeasured}
HAVE_GIT=${HAVE_GIT-$(command -v git)}   # without git (or HAVE_GIT=): apply --write (the patch written into the copy, not committed)
if [ "$DEVICE_ENV" != none ]; then source "$DEVICE_ENV"; fi
PY=${PYTHON:-python3}
TDX="$PY -m tritondx.cli"
export GIT_AUTHOR_NAME=${GIT_AUTHOR_NAME:-tritondx} GIT_AUTHOR_EMAIL=${GIT_AUTHOR_EMAIL:-tritondx@localhost}
export GIT_COMMITTER_NAME=${GIT_COMMITTER_NAME:-tritondx} GIT_COMMITTER_EMAIL=${GIT_COMMITTER_EMAIL:-tritondx@localhost}
mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
el() { echo $(( $(date +%s) - t0 )); }

main() {
  echo "== versions"
  $PY -c "import torch, triton; from importlib.metadata import version as v; print('torch', torch.__version__, \
'triton', triton.__version__, 'liger-kernel', v('liger-kernel'), \
torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')" || return 2
  local src
  src=$($PY -c "import liger_kernel, os; print(os.path.dirname(liger_kernel.__file__))") || {
    echo "liger-kernel is not installed here: carry its wheel (bench/scripts/device_capture.sh says how)"; return 2; }
  echo "== copy of $src -> $WORK/lib/liger_kernel (a git repository apply commits into, where git is installed)"
  rm -rf "$WORK" && mkdir -p "$WORK/lib"
  cp -r "$src" "$WORK/lib/liger_kernel" && find "$WORK/lib" -name __pycache__ -prune -exec rm -rf {} +
  if [ -n "$HAVE_GIT" ]; then
    git -C "$WORK/lib" init -q && git -C "$WORK/lib" add -A && git -C "$WORK/lib" commit -qm "liger_kernel as installed" \
      || return 2
  fi
  local lib
  lib=$(cd "$WORK/lib" && pwd)

  echo "== capture ($(el) s)"
  PYTHONPATH="$lib${PYTHONPATH:+:$PYTHONPATH}" COLUMNS=160 timeout 400 $TDX capture --out "$WORK/captured" --top "$TOP" \
    -- python3 bench/capture/step.py --size "$SIZE" --steps "$STEPS"
  local rc=$?
  cp "$WORK/captured/capture.json" "$RESULTS/" 2>/dev/null
  if [ $rc -ne 0 ]; then echo "capture failed (exit $rc): stopping"; return $rc; fi

  local deadline=$(( TOTAL_S - $(el) - RESERVE_S ))
  [ $deadline -lt 60 ] && deadline=60
  echo "== batch, deadline ${deadline} s ($(el) s)"
  timeout $(( deadline + 60 )) $TDX batch "$WORK/captured" --backend "$BACKEND" --out "$WORK/batch" \
    --max-rounds "$MAX_ROUNDS" --workers "$WORKERS" --deadline "$deadline" $ACCEPT > "$WORK/batch.log" 2>&1
  echo "batch exit $? ($(el) s)"; tail -12 "$WORK/batch.log"
  cp "$WORK/batch/summary.md" "$RESULTS/batch_summary.md" 2>/dev/null
  cp "$WORK/batch/results.json" "$RESULTS/batch_results.json" 2>/dev/null

  echo "== apply into the copy ($(el) s)"
  if [ -n "$HAVE_GIT" ]; then $TDX apply "$WORK/batch" --commit; git -C "$WORK/lib" log --oneline
  else $TDX apply "$WORK/batch" --write; fi
  : > "$RESULTS/apply_all.patch"
  for p in "$WORK"/batch/runs/*/apply.patch; do [ -f "$p" ] && { cat "$p"; echo; } >> "$RESULTS/apply_all.patch"; done

  echo "== step before/after, one process ($(el) s)"
  $PY bench/capture/bench_step.py alias "$WORK/lib/liger_kernel" "$WORK/alias" liger_kernel_patched > /dev/null || return 2
  # shellcheck disable=SC2086
  $PY bench/capture/bench_step.py run --size "$SIZE" --after-path "$WORK/alias" --batch "$WORK/batch" \
    --capture "$WORK/captured/capture.json" --out "$RESULTS" $BENCH_ARGS || return 2
  cat "$RESULTS/step_$SIZE.md"
  echo "== done in $(el) s: $RESULTS"
}

main 2>&1 | tee "$RESULTS/run.log"
