#!/usr/bin/env bash
# Device: batch the third-party corpus (carried as .corpus/, a copy of ../shared/corpus that git ignores:
# `rm -rf .corpus && cp -r ../shared/corpus .corpus` before the call) into $OUT/corpus.
# Usage: bash bench/scripts/device_corpus.sh WORKERS DEADLINE_S [ONLY] [MAX_ROUNDS]
# bubblewrap comes from a carried Debian package (.debs/), since the GPU image has none.
for f in .debs/*.deb; do dpkg -x "$f" / 2>/dev/null; done
source bench/scripts/device_env.sh
export TRITONDX_FINAL_PROFILE=0
mkdir -p $OUT/corpus
BATCH_EXTRA="--max-rounds ${4:-2}" timeout $(( $2 + 90 )) python3 bench/scripts/run_batch.py .corpus $OUT/corpus "$1" "$2" "${3:-}" \
  > $OUT/corpus_batch.log 2>&1
tail -5 $OUT/corpus_batch.log; cat $OUT/corpus/summary.md 2>/dev/null | head -60
cd $OUT/corpus && tar czf ../corpus_runs.tgz --exclude='*.passes.txt' --exclude='*.llir' --exclude='*.sass' --exclude='*.ttgir' \
  --exclude='*.ttir' --exclude='*.ptx' --exclude='checkpoints.sqlite*' --exclude='.locks' runs 2>/dev/null && rm -rf runs .locks
ls -la $OUT $OUT/corpus
