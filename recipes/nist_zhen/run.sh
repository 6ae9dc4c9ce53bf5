#!/usr/bin/env bash
# NIST Zh->En (licensed: the LDC training corpora and the NIST OpenMT evaluation sets, from https://www.ldc.upenn.edu
# under its agreements): check that your copy is in the layout of docs/recipes.md in --data-dir (train.zh,
# train.en; each NIST set's NAME.zh and its four references NAME.en0 .. NAME.en3) with the line counts of
# sets.yaml, segment the Chinese into words (jieba) and write the splits into WORK/corpus (corpus.py; with
# the unsegmented Chinese beside them, SPLIT.raw.zh.gz, for recipes/nist_verdict's lattice systems), then
# prepare, train Transformer-base to a budget of budgets.yaml (paper: 200,000 updates of 16,384 tokens; short:
# 100,000), average the last 5 checkpoints, translate each test set with beam 4 and score it against its four
# references (sacreBLEU, case-insensitive as the papers report, and cased; multi-bleu.perl's BLEU on the
# tokens): WORK/BUDGET/scores.tsv and scores.md.
#
# usage: recipes/nist_zhen/run.sh --data-dir NIST [--dev nist02] [--tests "nist03 nist04 ..."]
#          [--segmenter jieba|chars|thulac] [--sets FILE] [--work DIR] [--budget paper|short] [--gpus N] [--minutes N]
#          [--set KEY=VALUE ...]
#   --data-dir   your copy, in the layout above
#   --dev NAME   the dev set (default nist02; paper 001 takes nist06, paper 002 nist05)
#   --tests      the test sets (default: every set of sets.yaml but the dev set)
#   --segmenter  the Chinese word segmenter (default jieba; another needs another --work)
#   --sets FILE  the NIST sets and their line counts, if your copy's differ from sets.yaml's
#   --budget     budgets.yaml's schedule (default paper, paper 001's; short: half its updates), run in WORK/BUDGET
#   --gpus N     train on N GPUs under torchrun; with --set train.update_freq=M, N x M = 4 keeps the batch size
#   --minutes N  stop training after N minutes (default 0: at the budget's updates)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$here/../../work/nist_zhen"
src=zh tgt=en train_split=train valid_split=valid tests="" minutes_default=0

download_data() {
  echo "error: the NIST Zh-En corpora are licensed (LDC) and cannot be downloaded: give your copy with" \
    "--data-dir DIR (the layout: docs/recipes.md)" >&2
  exit 2
}

source "$here/../lib.sh"

recipe_score() {  # lib.sh's, against each NIST set's four references
  "$ordo" average --model "$out/run" --last "$average_last"
  local test ckpt
  for test in $tests; do
    zcat "$data_dir/$test.$src.gz" > "$out/$test.$src"
    for ckpt in best averaged; do
      "$ordo" translate --model "$out/run" --checkpoint "$ckpt" --input "$out/$test.$src" \
        --output "$out/$test.$ckpt.hyp"
    done
  done
  # as ordo evaluate --hyp HYP --ref TEST.en0.gz --ref TEST.en1.gz --ref TEST.en2.gz --ref TEST.en3.gz --lowercase
  "$py" "$here/corpus.py" score --work "$out" --corpus "$data_dir" --tests "$tests" | tee "$out/scores.md"
}

nist="" split_args=() args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --data-dir) nist="$2"; shift 2 ;;
    --dev|--tests|--segmenter|--sets) split_args+=("$1" "$2"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
[ -n "$nist" ] || download_data
recipe_args ${args[@]+"${args[@]}"}  # the other flags and the budget, checked before the corpus is segmented
[ "$download" = 0 ] || download_data
recipe_setup
recipe_budget
"$py" -c "import jieba" 2>/dev/null || "$root/.venv/bin/pip" install -q "jieba>=0.42"
"$py" "$here/corpus.py" split --data-dir "$nist" --out "$work/corpus" ${split_args[@]+"${split_args[@]}"}
tests="$(cat "$work/corpus/tests.txt")"
data_dir="$work/corpus"
recipe_run
