#!/usr/bin/env bash
# Device diagnostic: does CUDA initialise in a candidate runner's nested namespaces inside a bubblewrap job?
# Runs a one-line CUDA init under each unshare variant, inside a job-like bwrap (uid 65534, /proc/sys read-only,
# the GPU device nodes bound) and outside it. Usage: bash bench/scripts/nested_cuda_probe.sh   (carry .debs)
source bench/scripts/device_env.sh
PY=$(command -v python3)
T="import torch; torch.zeros(1, device='cuda'); print('ok', torch.cuda.device_count())"
variants=(
  "none|"
  "current|unshare -rmn --ipc --pid --fork --kill-child"
  "no-pid|unshare -rmn --ipc"
  "pid-only|unshare -r --pid --fork --kill-child"
  "user-only|unshare -r"
  "ipc|unshare -r --ipc"
  "net|unshare -rn"
  "mount|unshare -rm"
  "pid-mountproc|unshare -r --pid --fork --kill-child --mount-proc"
)
run_variants() {
  for v in "${variants[@]}"; do
    name=${v%%|*}; pre=${v#*|}
    r=$(timeout 60 $pre "$PY" -c "$T" 2>&1 | tail -1 | cut -c1-200)
    echo "  $1 $name: $r"
  done
}
export -f run_variants; export PY T
echo "outside bwrap:"; run_variants host
devs=""; for d in /dev/nvidia*; do [ -e "$d" ] && devs="$devs --dev-bind $d $d"; done
for uid in 65534 0; do
  echo "inside bwrap --uid $uid:"
  bwrap --uid $uid --gid $uid --ro-bind / / --dev /dev --proc /proc --ro-bind /proc/sys /proc/sys --tmpfs /tmp $devs \
    --unshare-all --as-pid-1 --die-with-parent --new-session --cap-drop ALL -- bash -c "$(declare -p variants); $(declare -f run_variants); run_variants bwrap$uid"
done
