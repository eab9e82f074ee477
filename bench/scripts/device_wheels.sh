#!/usr/bin/env bash
# Here (not on the GPU host): .whldev, a copy of .whl without the wheels the device image already holds (its
# package list: /work/.library/device/KINDS.md), so the tree, the committed results and the wheels stay under the
# 64 MiB a device call may carry (session 38: the full .whl made the call 66.6 MB). Carry .whldev and link it as
# .whl there: `ln -sfn ../../.whldev .whl` inside build/snap, as bench/scripts/device_corpus_tune.sh's header says.
set -e
cd "$(dirname "$0")/../.."
[ -d .whl ] || { echo "device_wheels.sh: no .whl here (bash ../shared/scripts/offline-wheels.sh .whl first)" >&2; exit 1; }
rm -rf .whldev && mkdir .whldev && cp .whl/*.whl .whldev/
for n in tiktoken regex pygments rich typer pyyaml xxhash requests markdown_it_py mdurl shellingham; do
  rm -f .whldev/${n}-[0-9]*.whl
done
# and what a batch with the offline expert never imports (8 MB; the tree and the committed results grew to 47 MB by
# 2026-12-07): the LLM path's client (tools/llm/client.py, imported only by the rewriter's LLM branch: openai,
# langchain_openai, jiter; distro stays, langsmith imports it) and langsmith's optional trace compression (zstandard:
# imported inside a try). Checked here: `tritondx optimize` on an example with these four blocked from import runs to
# its report. A device run with --llm carries .whl instead.
for n in openai langchain_openai jiter zstandard; do
  rm -f .whldev/${n}-[0-9]*.whl
done
grep -qx '/.whldev/' .git/info/exclude 2>/dev/null || echo '/.whldev/' >> .git/info/exclude
echo "device_wheels.sh: .whldev holds $(ls .whldev | wc -l) wheels, $(du -sh .whldev | cut -f1)"
