#!/usr/bin/env bash
# Create .venv (once) with tritondx and what it needs; re-run is cheap when nothing changed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${TRITONDX_VENV:-$root/.venv}
stamp=$venv/.tritondx-installed
want=$(cat "$root/pyproject.toml" | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip -q --disable-pip-version-check)
# A CPU build of torch is enough here; pin it so an unpinned "torch" does not pull a multi-GB CUDA build.
"$venv/bin/python" -c "import torch" 2>/dev/null || "${pip[@]}" install "torch==${TRITONDX_TORCH:-2.13.0}"
"${pip[@]}" install -e "$root[test]"
echo "$want" > "$stamp"
