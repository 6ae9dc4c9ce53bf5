#!/usr/bin/env bash
# Ja->En on small_parallel_enja (50k pairs of the Tanaka corpus, pre-tokenized: KyTea for ja, lowercased
# English): prepare, train for a fixed wall-time budget on the CPU, average, translate test with beam 5, score.
#
# usage: recipes/small_parallel_enja/run.sh [--data-dir DIR] [--work DIR] [--minutes N] [--download]
#   --data-dir  folder with {train,valid,test}.{ja,en}.gz (default: ../shared/data/small_parallel_enja)
#   --download  fetch the public files from github.com/odashi/small_parallel_enja into --data-dir first
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data_dir="$here/../../../shared/data/small_parallel_enja"
work="$here/../../work/small_parallel_enja"
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
src=ja tgt=en train_split=train valid_split=valid tests="test"
source "$here/../lib.sh"

if [ "$download" = 1 ]; then
  base=https://raw.githubusercontent.com/odashi/small_parallel_enja/master
  mkdir -p "$data_dir"
  for split in train dev:valid test; do
    for lang in ja en; do
      curl -fsSL "$base/${split%%:*}.$lang" | gzip > "$data_dir/${split##*:}.$lang.gz"
    done
  done
fi
mkdir -p "$work"
recipe_prepare
recipe_train
recipe_score
