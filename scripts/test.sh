#!/usr/bin/env bash
# Run the CPU test suite (no GPU needed). Extra arguments go to pytest.
# Sets up what the tests need: .venv with the test extras (scripts/bootstrap.sh test) and, once, the triton-ascend environment
# (.npu-venv: triton-ascend installs itself as `triton`, so it lives beside .venv) for the Ascend tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/bootstrap.sh" test
cd "$root"
py=${TRITONDX_VENV:-$root/.venv}/bin/python
if ! "$py" -m tritondx.tools.npu.toolchain find >/dev/null 2>&1; then
  echo "tests: installing the triton-ascend environment for the Ascend tests (first run only) ..." >&2
  start=$(date +%s)
  if "$py" -m tritondx.tools.npu.toolchain install >&2; then
    echo "tests: triton-ascend environment ready in $(( $(date +%s) - start )) s" >&2
  else
    echo "tests: the triton-ascend install failed; the Ascend tests will skip" >&2
  fi
fi
echo "tests: the CPU suite takes about 30 minutes on 2 cores (Triton interpreter, sandboxed jobs) ..." >&2
exec "$py" -m pytest tests/cpu -q --durations=25 "$@"
