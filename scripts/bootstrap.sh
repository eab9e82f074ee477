#!/usr/bin/env bash
# Create .venv (once) with tritondx and what it needs; a re-run is silent and instant when nothing changed.
#   bash scripts/bootstrap.sh        what `tritondx` needs (torch CPU, triton, langgraph, ...): run-example.sh
#   bash scripts/bootstrap.sh test   the same plus the test extras ([test]: pytest, Ray, the PostgreSQL client,
#                                    langgraph-cli, Liger, ...) on top: test.sh
# Progress goes to stderr: one line per step, and a line every 30 s ($TRITONDX_HEARTBEAT_S) while a long step
# runs. pip's own output goes to $venv/bootstrap.log; a failed step names that file and shows its last lines.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${TRITONDX_VENV:-$root/.venv}
extras=${1:-base}
case "$extras" in base|test) ;; *) echo "bootstrap: usage: bootstrap.sh [test]" >&2; exit 2 ;; esac
stamp=$venv/.tritondx-installed
want=$(sha256sum < "$root/pyproject.toml" | cut -c1-16)
# The stamp says what is installed: "<pyproject hash> <base|test>" ("test" includes "base"). A stamp with the
# hash alone was written by the earlier bootstrap, which always installed the test extras.
if [ -f "$stamp" ]; then
  read -r have_hash have_extras < "$stamp" || true
  have_extras=${have_extras:-test}
  if [ "${have_hash:-}" = "$want" ] && { [ "$have_extras" = test ] || [ "$extras" = base ]; }; then
    exit 0
  fi
fi
start=$SECONDS
say() { echo "bootstrap: $*" >&2; }
mkdir -p "$venv"
log=$venv/bootstrap.log
: > "$log"
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; say "interrupted; pip'"'"'s output so far is in $log"; exit 130' INT TERM
# step WHAT CMD...: one line saying WHAT, CMD's output to the log, a line every $every s while it runs; on failure
# the log's name and its last lines, and exit 1.
every=${TRITONDX_HEARTBEAT_S:-30}
case "$every" in ''|*[!0-9]*|0) every=30 ;; esac
step() {
  local what=$1 t0=$SECONDS next=$every rc=0
  shift
  say "$what ..."
  printf '\n=== %s\n$ %s\n' "$what" "$*" >> "$log"
  "$@" >> "$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    if (( SECONDS - t0 >= next )); then
      say "  ... still ${what%% (*} ($(( SECONDS - t0 )) s)"
      next=$(( next + every ))
    fi
  done
  wait "$pid" || rc=$?
  pid=
  if [ "$rc" != 0 ]; then
    say "failed after $(( SECONDS - t0 )) s: $what (exit $rc). pip's output is in $log; its last lines:"
    tail -n 20 "$log" | sed 's/^/  | /' >&2
    exit 1
  fi
}
what="tritondx"
[ "$extras" = test ] && what="tritondx and the test extras"
say "setting up $venv: $what (pip's output goes to $log)"
if [ ! -x "$venv/bin/python" ]; then
  step "creating the virtual environment" python3 -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check install --progress-bar off)
# A CPU build of torch is enough here; pin it so an unpinned "torch" does not pull a multi-GB CUDA build.
if ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  step "installing torch ${TRITONDX_TORCH:-2.13.0} (CPU)" "${pip[@]}" "torch==${TRITONDX_TORCH:-2.13.0}"
fi
if [ "$extras" = test ]; then
  step "installing tritondx and the test extras (triton, langgraph, pytest, Ray, psycopg, Liger, ...)" \
    "${pip[@]}" -e "$root[test]"
else
  step "installing tritondx and its dependencies (triton, langgraph, ...)" "${pip[@]}" -e "$root"
fi
echo "$want $extras" > "$stamp"
say "ready in $(( SECONDS - start )) s: the command is $venv/bin/tritondx"
