#!/usr/bin/env bash
# Run the CPU test suite (no GPU needed). Extra arguments go to pytest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/bootstrap.sh"
cd "$root"
exec "$root/.venv/bin/python" -m pytest tests/cpu -q "$@"
