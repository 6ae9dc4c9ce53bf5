#!/usr/bin/env bash
# Multi30k En->De (Elliott et al. 2016): prepare, train for a fixed wall-time budget on the CPU, average the
# last checkpoints, translate test2016 and test2017 with beam 5, score with sacreBLEU.
#
# usage: recipes/multi30k/run.sh [--data-dir DIR] [--work DIR] [--minutes N] [--download]
#   --data-dir  folder with {train,valid,test2016,test2017}.{en,de}.gz (default: ../shared/data/multi30k)
#   --download  fetch the public raw files from github.com/multi30k/dataset into --data-dir first
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data_dir="$here/../../../shared/data/multi30k"
work="$here/../../work/multi30k"
minutes=60
download=0
while [ $# -gt 0 ]; do
  case "$1" in
    --data-dir) data_dir="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --minutes) minutes="$2"; shift 2 ;;
    --download) download=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
src=en tgt=de train_split=train valid_split=valid tests="test2016 test2017"
source "$here/../lib.sh"

if [ "$download" = 1 ]; then
  base=https://github.com/multi30k/dataset/raw/master/data/task1/raw
  mkdir -p "$data_dir"
  for pair in train:train val:valid test_2016_flickr:test2016 test_2017_flickr:test2017; do
    for lang in en de; do
      curl -fsSL "$base/${pair%%:*}.$lang.gz" -o "$data_dir/${pair##*:}.$lang.gz"
    done
  done
fi
mkdir -p "$work"
recipe_prepare
recipe_train
recipe_score
