#!/usr/bin/env bash
# The main job on the bundled sample corpus: a web crawl (WARC) -> documents -> attributes -> dedup ->
# mixes -> token shards -> a two-stage trained, souped model exported for Hugging Face -> a suffix
# index of the training shards, tracing text (the soup's output among it) to training documents ->
# a report of every run as one offline HTML page.
# Usage: bash examples/run_demo.sh [VENV]   (`make demo` sets up the venv and calls this)
set -Eeuo pipefail
VENV="${1:-.venv}"
DP="$VENV/bin/dolma-pipe"
OUT="${DEMO_OUTPUT:-demo-output}"

# ---- helpers (tests/mixers/test_mix_search_demo.py sources this file for them) ----------------

STEP=setup
step() {  # step N TITLE: the step's header; a failure from here on is reported as step N's
  STEP="$1"
  [ "$1" = 1 ] || echo
  echo "== $1. $2"
}
# A failing step says so, with its status and the failing command; the command's own message is
# above it (a helper's failure, such as `filtered`'s, names its command there itself).
on_error() {
  local cmd="$2"
  case "$cmd" in return*) cmd="" ;; esac
  echo "demo: step $STEP failed (exit $1)${cmd:+: $cmd}" >&2
}
trap 'on_error $? "$BASH_COMMAND"' ERR

demo_config() {  # demo_config NAME: examples/configs/NAME copied into $OUT/configs/ with its paths in $OUT; prints the copy's path
  # The example configs name demo-output/... and each other (examples/configs/mix-*.yaml): the demo
  # runs copies naming $OUT and the other copies, rewritten as YAML (a path may hold any character).
  mkdir -p "$OUT/configs"
  "$VENV/bin/python" - "$1" "$OUT" <<'PY'
import re, sys, yaml
name, out = sys.argv[1], sys.argv[2]
def moved(v):
    if isinstance(v, dict):
        return {k: moved(x) for k, x in v.items()}
    if isinstance(v, list):
        return [moved(x) for x in v]
    if isinstance(v, str) and v.startswith("demo-output/"):
        return out + v[len("demo-output"):]
    if isinstance(v, str) and re.fullmatch(r"examples/configs/mix-[\w-]+\.yaml", v):
        return f"{out}/configs/{v.rsplit('/', 1)[1]}"
    return v
with open(f"examples/configs/{name}", encoding="utf-8") as fh:
    config = moved(yaml.safe_load(fh))
with open(f"{out}/configs/{name}", "w", encoding="utf-8") as fh:
    fh.write(f"# examples/configs/{name} with its paths in {out} (examples/run_demo.sh)\n")
    yaml.safe_dump(config, fh, sort_keys=False, allow_unicode=True)
PY
  echo "$OUT/configs/$1"
}

filtered() {  # filtered PATTERN LOG CMD...: CMD's output to LOG; shown from the first line matching PATTERN, or all of its end when CMD fails
  local pattern="$1" log="$2" status
  shift 2
  mkdir -p "$(dirname "$log")"
  if "$@" > "$log" 2>&1; then
    sed -n "/$pattern/,\$p" "$log"
  else
    status=$?
    tail -n 25 "$log" >&2
    echo "demo: '$*' failed (exit $status); its whole output is in $log" >&2
    return "$status"
  fi
}

logged() {  # logged LOG CMD...: CMD's output to LOG, its end shown only when CMD fails
  local log="$1" status
  shift
  mkdir -p "$(dirname "$log")"
  if "$@" > "$log" 2>&1; then return 0; else status=$?; fi
  tail -n 25 "$log" >&2
  echo "demo: '$*' failed (exit $status); its whole output is in $log" >&2
  return "$status"
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then return 0; fi  # sourced: the helpers only

cd "$(dirname "$0")/.."

step 1 "warc: the sample corpus's documents as the HTML pages of a small web crawl, extracted back into Dolma documents -> $OUT/corpus/"
# The crawl: one WARC.gz per sample file (examples/build_sample_warc.py: each page's text inside a
# site's header, menus and footer, among requests, a redirect, an image, robots.txt, a stylesheet).
"$VENV/bin/python" examples/build_sample_warc.py "$OUT/crawl/documents"
# One run per source (its name is the documents' `source`), Dolma's resiliparse extractor; `added`
# fixed so that a new demo writes the same documents as the last.
for src in debian-handbook fortunes gcide linux-doc python-doc; do
  logged "$OUT/logs/warc-$src.log" "$DP" warc --documents "$OUT/crawl/documents/$src/*.warc.gz" --destination "$OUT/web/$src" \
    --source_name "$src" --linearizer resiliparse --added 2024-06-01T00:00:00.000Z --processes 2
done
"$VENV/bin/python" - "$OUT" <<'PY'
import collections, glob, json, sys
totals = collections.Counter()
for path in sorted(glob.glob(f"{sys.argv[1]}/web/*/_manifest.json")):
    with open(path, encoding="utf-8") as fh:
        totals.update(json.load(fh)["totals"])
skipped = ", ".join(f"{k[len('skipped_'):].replace('_', ' ')} {v:,}" for k, v in sorted(totals.items()) if k.startswith("skipped_"))
print(f"{totals['records']:,} WARC records: {totals['written']:,} pages written as documents, {totals.get('quarantined', 0):,} quarantined; skipped: {skipped}")
PY
# Every later step reads $OUT/corpus/documents/<source>/: the extracted documents, validated.
"$DP" convert --documents "$OUT/web/*/documents/*/*.jsonl.gz" --destination "$OUT/corpus" --format jsonl.gz

step 2 "stats: what the corpus holds, per source"
"$DP" stats --documents "$OUT/corpus/documents/*/*.jsonl.gz" --destination "$OUT/stats"

step 3 "tag: language, Gopher and C4 rules (the papers' rules and verdicts), PII, profanity, lengths -> $OUT/corpus/attributes/demo/"
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

step 4 "the Rust Bloom filter: exact duplicate documents and repeated paragraphs"
"$VENV/bin/python" examples/bloom_demo.py "$OUT/corpus/documents/*/*.jsonl.gz"

step 5 "dedup: duplicate documents and paragraphs (Dolma's dedupe configs), near-duplicates (MinHash) -> $OUT/corpus/attributes/dedup_*/"
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

step 6 "mix: a broad stage-1 mix (Dolma's mixer schema) and a three-seed stage-2 Dolmino mix -> $OUT/mix/"
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
# The specs name demo-output/...: they run as copies naming $OUT.
stage1=$(demo_config mix-stage1.yaml)
stage2=$(demo_config mix-stage2.yaml)
"$DP" mix -c "$stage1"
"$DP" mix -c "$stage2"
"$VENV/bin/python" - "$OUT" <<'PY'
import glob, gzip, json, sys
out = sys.argv[1]
for name, pattern in (("stage 1", f"{out}/mix/stage1/*.jsonl.gz"), ("stage 2", f"{out}/mix/stage2/seed-*/documents/*.jsonl.gz")):
    shards = sorted(glob.glob(pattern))
    docs = 0
    for path in shards:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                try:
                    json.loads(line)
                except ValueError:
                    sys.exit(f"{path}:{n} is not a whole document")
                docs += 1
    print(f"{name} mix: {docs:,} documents in {len(shards)} shards, every line a whole document")
PY

step 7 "tokenize: the stage-1 mix into OLMo token shards (train/ and val/) -> $OUT/tokens/"
"$DP" tokenize -c examples/tokenize.yaml --documents "$OUT/mix/stage1/*.jsonl.gz" --destination "$OUT/tokens"

# Training: a tiny OLMo-2-style model on CPU (torch, a one-rank gloo group; the same commands run
# the 1B and 7B presets with torchrun on GPUs). Each run evaluates on stage 1's validation shards,
# which no mix trains on (tokenize holds documents out by a seeded hash of their id).
TRAIN="$VENV/bin/python -m train"
S1_STEPS=100
S2_STEPS=30
summary() {  # one line per run from its metrics.jsonl: steps, tokens, seconds, last training and validation loss
  "$VENV/bin/python" - "$1" "$2" "$3" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(f"{sys.argv[2]}/metrics.jsonl")]
train = [r for r in rows if "loss" in r]
evals = [r for r in rows if "eval/loss" in r]
last, ev = train[-1], evals[-1]
print(f"{sys.argv[1]}: {last['step']} steps, {last['tokens']:,} tokens in {sys.argv[3]} s; "
      f"train loss {last['loss']:.3f}, validation loss {ev['eval/loss']:.3f} (ppl {ev['eval/ppl']:,.0f})")
PY
}

step 8 "train stage 1: a tiny model (train/configs/tiny.yaml) on the stage-1 tokens -> $OUT/runs/stage1/"
t0=$SECONDS
$TRAIN --config train/configs/tiny.yaml --set log.interval=50 --set train.max_steps=$S1_STEPS \
  --set "data.paths=[$OUT/tokens/train]" --set "data.val_paths=[$OUT/tokens/val]" --set "checkpoint.save_dir=$OUT/runs/stage1"
summary "stage 1" "$OUT/runs/stage1" $((SECONDS - t0))

step 9 "stage 2: tokenize each seed's Dolmino mix, train from the stage-1 checkpoint on it (train/configs/tiny-stage2.yaml) -> $OUT/runs/stage2-seed-<n>/"
for n in 0 1 2; do
  # A Dolmino mix repeats documents on purpose (max_repetition): their ids repeat too.
  "$DP" tokenize -c examples/tokenize.yaml --documents "$OUT/mix/stage2/seed-$n/documents/*.jsonl.gz" \
    --destination "$OUT/tokens/stage2/seed-$n" --duplicate_ids ignore >/dev/null
  t0=$SECONDS
  $TRAIN --config train/configs/tiny-stage2.yaml --set log.interval=50 --set train.max_steps=$S2_STEPS --set data.seed=$n \
    --set "data.paths=[$OUT/tokens/stage2/seed-$n/train]" --set "data.val_paths=[$OUT/tokens/val]" \
    --set "checkpoint.init_from=$OUT/runs/stage1/step$S1_STEPS" --set "checkpoint.save_dir=$OUT/runs/stage2-seed-$n"
  summary "stage 2, seed $n" "$OUT/runs/stage2-seed-$n" $((SECONDS - t0))
done

step 10 "soup: average the three stage-2 models -> $OUT/runs/soup/"
INGREDIENTS=("$OUT/runs/stage2-seed-0/step$S2_STEPS" "$OUT/runs/stage2-seed-1/step$S2_STEPS" "$OUT/runs/stage2-seed-2/step$S2_STEPS")
"$VENV/bin/python" -m train.soup --out "$OUT/runs/soup" "${INGREDIENTS[@]}"

step 11 "export the soup as a Hugging Face Olmo2 model with its tokenizer -> $OUT/hf-model/"
"$VENV/bin/python" -m train.export_hf "$OUT/runs/soup" "$OUT/hf-model" --eos-id 50279 --pad-id 1
"$VENV/bin/python" - "$OUT" <<'PY'
import glob, sys
import numpy as np, torch, transformers
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
from dolma_pipe.tokenizer import resolve
from train.checkpoint import load_model_weights, read_state
from train.evaluate import empty_model, model_config_from_state
out = sys.argv[1]
transformers.logging.disable_progress_bar()
tok = PreTrainedTokenizerFast(tokenizer_file=resolve("olmo:gpt-neox-olmo-dolma-v1_5"), eos_token="<|endoftext|>", pad_token="<|padding|>")
tok.save_pretrained(f"{out}/hf-model")
hf = AutoModelForCausalLM.from_pretrained(f"{out}/hf-model").float().eval()
ours = empty_model(model_config_from_state(read_state(f"{out}/runs/soup")), "cpu")
load_model_weights(f"{out}/runs/soup", ours)
shard = sorted(glob.glob(f"{out}/tokens/val/*.npy"))[0]
x = torch.from_numpy(np.fromfile(shard, dtype=np.uint16)[: 4 * 128].astype(np.int64)).view(4, 128)
with torch.no_grad():
    a, b = hf(x).logits, ours.eval()(x)
loss = torch.nn.functional.cross_entropy(a[:, :-1, :50280].reshape(-1, 50280), x[:, 1:].reshape(-1)).item()
prompt = tok("The Debian package manager", return_tensors="pt")
text = tok.decode(hf.generate(**prompt, max_new_tokens=12, do_sample=False, pad_token_id=1)[0])
print(f"transformers loads {out}/hf-model: logits within {(a - b).abs().max().item():.1e} of ours on 512 validation tokens "
      f"(loss {loss:.4f}); greedy: {text!r}")
PY

step 12 "validation loss and perplexity of every model on the same held-out shards ($OUT/tokens/val)"
"$VENV/bin/python" -m train.evaluate --val-paths "$OUT/tokens/val" --untrained train/configs/tiny.yaml \
  --output "$OUT/runs/evaluation.json" "$OUT/runs/stage1/step$S1_STEPS" "${INGREDIENTS[@]}" "$OUT/runs/soup"
step 13 "index: suffix arrays over the stage-1 token shards; trace a training passage, a held-out one and the soup's generation -> $OUT/index/"
"$DP" index --shards "$OUT/tokens/train" --destination "$OUT/index"
"$VENV/bin/python" - "$OUT" <<'PY'
import glob, sys
import torch, transformers
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
from dolma_pipe.stages.index import Index
from dolma_pipe.tokenizer import resolve
from train.shards import read_shard
out = sys.argv[1]
index = Index(f"{out}/index")  # every shard checked against the digest the build recorded

def passage(split):  # 120 tokens from the middle of the first long document of a split's first shard
    shard = read_shard(sorted(glob.glob(f"{out}/tokens/{split}/*.npy"))[0], "uint16", eos_id=50279)
    i = next(i for i, d in enumerate(shard.docs) if d.n_tokens > 400)
    return shard.docs[i].id, index.decode(shard.document(i)[200:320].tolist())

transformers.logging.disable_progress_bar()
tok = PreTrainedTokenizerFast(tokenizer_file=resolve("olmo:gpt-neox-olmo-dolma-v1_5"))
hf = AutoModelForCausalLM.from_pretrained(f"{out}/hf-model").float().eval()
prompt = tok("The Debian package manager", return_tensors="pt")
torch.manual_seed(0)  # sampled (greedy decoding of a model this small repeats one token), the same on a rerun
with torch.no_grad():
    ids = hf.generate(**prompt, max_new_tokens=60, do_sample=True, top_k=40, pad_token_id=1)[0]
generated = tok.decode(ids, skip_special_tokens=True)
train_id, train_text = passage("train")
val_id, val_text = passage("val")
for label, text in ((f"(a) training document {train_id}", train_text), (f"(b) held-out document {val_id}", val_text), ("(c) the soup's generation", generated)):
    spans = index.trace(text, min_length=5, docs=1)
    covered = len({i for s in spans for i in range(s.start, s.end)})
    print(f"{label}: {covered} of {len(index.encode(text))} tokens inside {len(spans)} span(s) of 5+ tokens found verbatim in the training shards")
    for s in spans[:3]:  # the least likely first
        d = s.documents[0]
        print(f"    x{s.count:,} {s.text[:60]!r}  <- {d.id} ({d.src.rsplit('/', 3)[-2]}/{d.src.rsplit('/', 1)[-1]}:{d.loc})")
PY

step 14 "report: one offline page of what every stage did, and the data behind it -> $OUT/report/"
"$DP" report --runs "$OUT" --destination "$OUT/report" --no-progress | tail -2
echo "open $OUT/report/report.html in a browser (it needs no network)"

step 15 "mix-search: a swarm of 8 tiny proxies over the stage-2 sources proposes their ratios -> $OUT/search/"
"$VENV/bin/python" examples/train_tokenizer.py "$OUT/search-tokens/tokenizer.json" "$OUT/corpus/documents/*/*" >/dev/null
for src in python-doc linux-doc debian-handbook gcide; do
  "$DP" tokenize --documents "$OUT/corpus/documents/$src/*" --destination "$OUT/search-tokens/$src" --no-progress \
    --tokenizer.name_or_path "$OUT/search-tokens/tokenizer.json" --tokenizer.eos_token_id 0 --validation.fraction 0.1 \
    >/dev/null 2>"$OUT/search-tokens/tokenize-$src.log" || { cat "$OUT/search-tokens/tokenize-$src.log"; exit 1; }
done
# Its spec is a copy naming $OUT, and names step 6's copy of the stage-2 spec (whose counts it reuses).
search=$(demo_config mix-search.yaml)
filtered '^swarm:' "$OUT/logs/mix-search.log" "$DP" mix-search -c "$search" --no-progress
echo "-- mix makes the proposal as written (mix-search checked it with mix's rules) -> $OUT/search/mix/; its plan:"
filtered '^Dolmino plan' "$OUT/logs/mix-proposal.log" "$DP" mix -c "$OUT/search/proposal.mix.yaml" --no-progress | sed -n '1,/^  (repetition/p'

echo
echo "Outputs under $OUT/ (each stage wrote _manifest.json; a rerun skips finished work, --force redoes it)."
echo "dolma-pipe list shows every stage and tagger; train/README.md the trainer, soup, evaluation and export."
