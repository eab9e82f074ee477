#!/usr/bin/env bash
# Optimize a bundled example with the offline expert (no GPU needed: the Triton interpreter checks it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/bootstrap.sh"
example=${1:-$root/examples/softmax_three_pass.py}
cd "$root"
exec "$root/.venv/bin/tritondx" optimize "$example" "${@:2}"
