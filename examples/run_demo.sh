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
echo "== 3. tag: language, Gopher and C4 rules, PII, profanity, lengths -> $OUT/corpus/attributes/demo/"
"$DP" tag --documents "$OUT/corpus/documents/*/*.jsonl.gz" --experiment demo \
  --taggers ft_lang_id gopher_v1 c4_v2 pii_regex_with_counts profanity_document lengths_v1 \
  --tagger_options.ft_lang_id.granularity document
"$VENV/bin/python" - "$OUT" <<'PY'
import collections, glob, sys
from dolma_pipe.attributes import read_with_attributes
langs, kept, pii = collections.Counter(), 0, 0
docs = 0
for path in sorted(glob.glob(f"{sys.argv[1]}/corpus/documents/*/*.jsonl.gz")):
    for _, doc, attrs in read_with_attributes(path, ["demo"]):
        docs += 1
        top = max((k for k in attrs if k.startswith("demo__ft_lang_id__doc_")), key=lambda k: attrs[k][0][2], default=None)
        langs[top.rsplit("_", 1)[-1] if top else "?"] += 1
        kept += attrs["demo__gopher_v1__keep"][0][2] == 1.0
        pii += attrs["demo__pii_regex_with_counts__doc_count"][0][2] > 0
print(f"{docs:,} documents: languages {dict(langs.most_common(10))}")
print(f"Gopher rules keep {kept:,}; {pii:,} documents contain PII")
PY

echo
echo "== 4. the Rust Bloom filter: exact duplicate documents and repeated paragraphs"
"$VENV/bin/python" examples/bloom_demo.py "$OUT/corpus/documents/*/*.jsonl.gz"

echo
echo "Outputs under $OUT/ (each stage wrote _manifest.json; rerunning skips finished files, --force redoes them)."
"$DP" list
