#!/usr/bin/env bash
# The main job on the bundled sample corpus, with the stages that exist so far.
# Usage: bash examples/run_demo.sh [VENV]   (`make demo` sets up the venv and calls this)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv}"
DP="$VENV/bin/dolma-pipe"
OUT="${DEMO_OUTPUT:-demo-output}"

echo "== 1. convert: validate the sample corpus and write clean Dolma documents"
"$DP" convert --documents 'examples/sample/documents/*/*' --destination "$OUT/corpus" --format jsonl.gz

echo
echo "== 2. stats: what the corpus holds, per source"
"$DP" stats --documents "$OUT/corpus/documents/*/*.jsonl.gz" --destination "$OUT/stats"

echo
echo "== 3. the Rust Bloom filter: exact duplicate documents and repeated paragraphs"
"$VENV/bin/python" examples/bloom_demo.py "$OUT/corpus/documents/*/*.jsonl.gz"

echo
echo "Outputs under $OUT/ (each stage wrote _manifest.json; rerunning skips finished files, --force redoes them)."
"$DP" list
