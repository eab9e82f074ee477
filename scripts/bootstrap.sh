#!/usr/bin/env bash
# Create .venv (once) with tritondx and what it needs; re-run is cheap when nothing changed.
# Progress goes to stderr: each step says what it installs, and pip shows its own progress.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${TRITONDX_VENV:-$root/.venv}
stamp=$venv/.tritondx-installed
want=$(cat "$root/pyproject.toml" | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
start=$(date +%s)
say() { echo "bootstrap: $*" >&2; }
say "setting up $venv (first run, or pyproject.toml changed)"
[ -x "$venv/bin/python" ] || { say "creating the virtual environment ..."; python3 -m venv "$venv"; }
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
# A CPU build of torch is enough here; pin it so an unpinned "torch" does not pull a multi-GB CUDA build.
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  say "installing torch ${TRITONDX_TORCH:-2.13.0} (CPU) ..."
  "${pip[@]}" install --progress-bar on "torch==${TRITONDX_TORCH:-2.13.0}" >&2
fi
say "installing tritondx and its dependencies (triton, langgraph, ...) ..."
"${pip[@]}" install --progress-bar on -e "$root[test]" >&2
echo "$want" > "$stamp"
say "ready in $(( $(date +%s) - start )) s: the command is $venv/bin/tritondx"
