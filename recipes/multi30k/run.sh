#!/usr/bin/env bash
# Multi30k En->De (Elliott et al. 2016): prepare, train for a fixed wall-time budget on the CPU, average the
# last checkpoints, translate test2016 and test2017 with beam 5, score with sacreBLEU.
#
# usage: recipes/multi30k/run.sh [--data-dir DIR] [--work DIR] [--minutes N] [--download]
#   --data-dir  folder with {train,valid,test2016,test2017}.{en,de}.gz (default: data/multi30k in the repository)
#   --download  fetch the public raw files from github.com/multi30k/dataset into --data-dir first
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data_dir="$here/../../data/multi30k"
work="$here/../../work/multi30k"
src=en tgt=de train_split=train valid_split=valid tests="test2016 test2017"

download_data() {
  local base=https://github.com/multi30k/dataset/raw/master/data/task1/raw pair lang
  for pair in train:train val:valid test_2016_flickr:test2016 test_2017_flickr:test2017; do
    for lang in en de; do
      download_file "$base/${pair%%:*}.$lang.gz" "$data_dir/${pair##*:}.$lang.gz"
    done
  done
}

source "$here/../lib.sh"
recipe_main "$@"
