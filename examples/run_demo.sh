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
echo "== 3. tag: language, Gopher and C4 rules (the papers' rules and verdicts), PII, profanity, lengths -> $OUT/corpus/attributes/demo/"
"$DP" tag --documents "$OUT/corpus/documents/*/*.jsonl.gz" --experiment demo \
  --taggers ft_lang_id gopher c4 pii_regex_with_counts profanity_document lengths_v1 \
  --tagger_options.ft_lang_id.granularity document
"$VENV/bin/python" - "$OUT" <<'PY'
import collections, glob, sys
from dolma_pipe.attributes import read_with_attributes
langs, kept, c4_kept, pii = collections.Counter(), 0, 0, 0
docs = 0
for path in sorted(glob.glob(f"{sys.argv[1]}/corpus/documents/*/*.jsonl.gz")):
    for _, doc, attrs in read_with_attributes(path, ["demo"]):
        docs += 1
        top = max((k for k in attrs if k.startswith("demo__ft_lang_id__doc_")), key=lambda k: attrs[k][0][2], default=None)
        langs[top.rsplit("_", 1)[-1] if top else "?"] += 1
        kept += attrs["demo__gopher__keep"][0][2] == 1.0
        c4_kept += attrs["demo__c4__keep"][0][2] == 1.0
        pii += attrs["demo__pii_regex_with_counts__doc_count"][0][2] > 0
print(f"{docs:,} documents: languages {dict(langs.most_common(10))}")
print(f"Gopher rules keep {kept:,}, C4 rules keep {c4_kept:,}; {pii:,} documents contain PII")
PY

echo
echo "== 4. the Rust Bloom filter: exact duplicate documents and repeated paragraphs"
"$VENV/bin/python" examples/bloom_demo.py "$OUT/corpus/documents/*/*.jsonl.gz"

echo
echo "== 5. dedup: duplicate documents and paragraphs (Dolma's dedupe configs), near-duplicates (MinHash) -> $OUT/corpus/attributes/dedup_*/"
mkdir -p "$OUT/configs"
cat > "$OUT/configs/dedup-docs.json" <<JSON
{"documents": ["$OUT/corpus/documents/*/*.jsonl.gz"], "dedupe": {"name": "dedup_docs", "documents": {"attribute_name": "bff_duplicate_docs", "key": "\$.text"}, "skip_empty": true},
 "bloom_filter": {"file": "$OUT/dedup-docs.bloom", "read_only": false, "estimated_doc_count": 1000000, "desired_false_positive_rate": 1e-6}}
JSON
cat > "$OUT/configs/dedup-paras.json" <<JSON
{"documents": ["$OUT/corpus/documents/*/*.jsonl.gz"], "dedupe": {"name": "dedup_paras", "paragraphs": {"attribute_name": "bff_duplicate_paragraph_spans"}, "skip_empty": true},
 "bloom_filter": {"file": "$OUT/dedup-paras.bloom", "read_only": false, "estimated_doc_count": 1000000, "desired_false_positive_rate": 1e-6}}
JSON
"$DP" dedup -c "$OUT/configs/dedup-docs.json"
"$DP" dedup -c "$OUT/configs/dedup-paras.json"
"$DP" dedup --documents "$OUT/corpus/documents/*/*.jsonl.gz" --dedupe.name dedup_near --minhash.threshold 0.8
"$VENV/bin/python" - "$OUT" <<'PY'
import sys
from dolma_pipe.manifest import read_manifest
out = sys.argv[1]
docs = read_manifest(f"{out}/corpus/attributes/dedup_docs").results
paras = read_manifest(f"{out}/corpus/attributes/dedup_paras").results
near = read_manifest(f"{out}/corpus/attributes/dedup_near").results
clusters = near["phases"]["clusters"]["counts"]
print(f"{docs['documents']:,} documents: {docs['marked'].get('marked_documents', 0):,} exact duplicates, "
      f"{paras['marked'].get('marked_paragraphs', 0):,} duplicate paragraphs, "
      f"{clusters.get('clusters', 0):,} near-duplicate clusters ({near['marked'].get('marked_near_duplicates', 0):,} documents to drop)")
PY

echo
echo "== 6. mix: a broad stage-1 mix (Dolma's mixer schema) and a three-seed stage-2 Dolmino mix -> $OUT/mix/"
# The mixes read the tagger's attributes (demo) and the dedup attributes dedup_docs and dedup_paras,
# made here with Dolma's dedupe configs if no earlier step made them.
mkdir -p "$OUT/configs"
for kind in docs paras; do
  if [ ! -d "$OUT/corpus/attributes/dedup_$kind" ]; then
    if [ "$kind" = docs ]; then what='"documents": {"attribute_name": "bff_duplicate_docs", "key": "$.text"}'
    else what='"paragraphs": {"attribute_name": "bff_duplicate_paragraph_spans"}'; fi
    cat > "$OUT/configs/dedup-$kind.json" <<JSON
{"documents": ["$OUT/corpus/documents/*/*.jsonl.gz"], "dedupe": {"name": "dedup_$kind", $what, "skip_empty": true},
 "bloom_filter": {"file": "$OUT/dedup-$kind.bloom", "read_only": false, "estimated_doc_count": 1000000, "desired_false_positive_rate": 1e-6}}
JSON
    "$DP" dedup -c "$OUT/configs/dedup-$kind.json"
  fi
done
# The specs name demo-output/...; a DEMO_OUTPUT elsewhere gets its own copy of them.
for stage in stage1 stage2; do sed "s#demo-output/#$OUT/#g" "examples/configs/mix-$stage.yaml" > "$OUT/configs/mix-$stage.yaml"; done
"$DP" mix -c "$OUT/configs/mix-stage1.yaml"
"$DP" mix -c "$OUT/configs/mix-stage2.yaml"

echo
echo "== 7. tokenize: the stage-1 mix into OLMo token shards (train/ and val/) -> $OUT/tokens/"
"$DP" tokenize -c examples/tokenize.yaml --documents "$OUT/mix/stage1/*.jsonl.gz" --destination "$OUT/tokens"
echo "train/configs/tiny.yaml trains on these shards: $VENV/bin/python -m train --config train/configs/tiny.yaml"

echo
echo "Outputs under $OUT/ (each stage wrote _manifest.json; rerunning skips finished files, --force redoes them)."
"$DP" list
