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
# pytest-xdist workers: two per core (most tests wait on sandboxed subprocesses), at most 8; TRITONDX_TEST_WORKERS
# sets the count (0: one process, no xdist). --dist loadgroup (pyproject.toml) keeps the tests that share a costly
# fixture on one worker (tests/cpu/conftest.py).
cores=$(nproc 2>/dev/null || echo 2)
workers=${TRITONDX_TEST_WORKERS:-$(( cores * 2 > 8 ? 8 : cores * 2 ))}
echo "tests: the CPU suite takes about 15-18 minutes on 2 cores with $workers workers on a quiet machine (Triton interpreter," \
     "sandboxed jobs; measured: pytest 799-1069 s on 2026-12-06/07; up to 2-2.5x that on a loaded machine) ..." >&2
exec "$py" -m pytest tests/cpu -n "$workers" -q --durations=25 "$@"
