#!/usr/bin/env bash
# ASPEC Ja->En (licensed; get it from https://jipsti.jst.go.jp/aspec/): check that the distribution's files
# are in --data-dir, write the splits (train-1 and train-2: the papers' 2M pairs; dev, test) into WORK/corpus
# checking the line counts the release documents, then prepare, train Transformer-base to a budget of
# budgets.yaml (paper: 300,000 updates of 32,768 tokens; short: 100,000 of 24,576), average the last 5
# checkpoints, translate test with beam 5 and score with sacreBLEU.
#
# usage: recipes/aspec_jaen/run.sh --data-dir ASPEC/ASPEC-JE [--work DIR] [--budget paper|short] [--gpus N]
#          [--minutes N] [--release FILE] [--set KEY=VALUE ...]
#   --data-dir  the ASPEC-JE folder as distributed: train/train-1.txt, train/train-2.txt, dev/dev.txt,
#               test/test.txt
#   --release   another description of the folder than release.yaml (its line counts: a miniature copy)
#   --budget    budgets.yaml's schedule (default paper, paper 000's; short: a quarter of its tokens); the run
#               and its translations in WORK/BUDGET
#   --gpus N    train on N GPUs under torchrun; with --set train.update_freq=M, N x M = the budget's update_freq
#               (8 paper, 6 short) keeps the batch size
#   --minutes N stop training after N minutes (default 0: at the budget's updates)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$here/../../work/aspec_jaen"
src=ja tgt=en train_split=train valid_split=valid tests="test" minutes_default=0

download_data() {
  echo "error: ASPEC is licensed and cannot be downloaded: give its ASPEC-JE folder with --data-dir DIR" >&2
  exit 2
}

source "$here/../lib.sh"
aspec="" aspec_release="$here/release.yaml" args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --data-dir) aspec="$2"; shift 2 ;;
    --release) aspec_release="$2"; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
[ -n "$aspec" ] || download_data
recipe_args ${args[@]+"${args[@]}"}  # the other flags and the budget, checked before the splits are written
[ "$download" = 0 ] || download_data
recipe_setup
recipe_budget
"$py" "$here/../fetch.py" "$aspec_release" --local "$aspec" --data-dir "$work/corpus"
data_dir="$work/corpus"
recipe_run
