#!/usr/bin/env bash
# Optimize a bundled example with the offline expert (no GPU needed: the Triton interpreter checks it).
# Installs only what `tritondx` needs (scripts/bootstrap.sh; the test extras come with scripts/test.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${TRITONDX_VENV:-$root/.venv}
bash "$root/scripts/bootstrap.sh"
example=${1:-$root/examples/softmax_three_pass.py}
cd "$root"
echo "example: optimizing $example (Triton interpreter on CPU; one line per step) ..." >&2
exec "$venv/bin/tritondx" optimize "$example" "${@:2}"
