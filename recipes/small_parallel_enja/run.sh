#!/usr/bin/env bash
# Ja->En on small_parallel_enja (50k pairs of the Tanaka corpus, pre-tokenized: KyTea for ja, lowercased
# English): prepare, train for a fixed wall-time budget on the CPU, average, translate test with beam 5, score.
#
# usage: recipes/small_parallel_enja/run.sh [--data-dir DIR] [--work DIR] [--minutes N] [--download]
#   --data-dir  folder with {train,valid,test}.{ja,en}.gz (default: data/small_parallel_enja in the repository)
#   --download  fetch the public files from github.com/odashi/small_parallel_enja into --data-dir first
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data_dir="$here/../../data/small_parallel_enja"
work="$here/../../work/small_parallel_enja"
src=ja tgt=en train_split=train valid_split=valid tests="test"

download_data() {
  local base=https://raw.githubusercontent.com/odashi/small_parallel_enja/master split lang
  for split in train dev:valid test; do
    for lang in ja en; do
      download_file "$base/${split%%:*}.$lang" "$data_dir/${split##*:}.$lang.gz" gzip
    done
  done
}

source "$here/../lib.sh"
recipe_main "$@"
