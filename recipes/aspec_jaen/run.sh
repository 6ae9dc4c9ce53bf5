#!/usr/bin/env bash
# ASPEC Ja->En (licensed; get it from https://jipsti.jst.go.jp/aspec/): check that the distribution's files
# are in --data-dir, write the splits (train-1's 1M pairs, dev, test) into WORK/corpus checking the line counts
# the release documents, then prepare, train Transformer-base (train.yaml: 100,000 updates of ~25k tokens),
# average the last checkpoints, translate test with beam 5 and score with sacreBLEU.
#
# usage: recipes/aspec_jaen/run.sh --data-dir ASPEC/ASPEC-JE [--work DIR] [--gpus N] [--minutes N]
#          [--set KEY=VALUE ...]
#   --data-dir  the ASPEC-JE folder as distributed: train/train-1.txt, dev/dev.txt, test/test.txt
#   --gpus N    train on N GPUs under torchrun; with --set train.update_freq=M, N x M = 6 keeps the batch size
#   --minutes N stop training after N minutes (default 0: at train.yaml's max_steps)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$here/../../work/aspec_jaen"
src=ja tgt=en train_split=train valid_split=valid tests="test" minutes_default=0

download_data() {
  echo "error: ASPEC is licensed and cannot be downloaded: give its ASPEC-JE folder with --data-dir DIR" >&2
  exit 2
}

source "$here/../lib.sh"
aspec="" args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --data-dir) aspec="$2"; shift 2 ;;
    --work) work="$2"; args+=("$1" "$2"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
[ -n "$aspec" ] || download_data
recipe_setup
"$py" "$here/../fetch.py" "$here/release.yaml" --local "$aspec" --data-dir "$work/corpus"
recipe_main --data-dir "$work/corpus" ${args[@]+"${args[@]}"}
