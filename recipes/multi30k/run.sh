#!/usr/bin/env bash
# Multi30k En->De (Elliott et al. 2016): prepare, train for a fixed wall-time budget on the CPU, average the
# last checkpoints, translate test2016 and test2017 with beam 5, score with sacreBLEU.
#
# usage: recipes/multi30k/run.sh [--data-dir DIR] [--work DIR] [--minutes N] [--download]
#   --data-dir  folder with {train,valid,test2016,test2017}.{en,de}.gz (default: ../shared/data/multi30k)
#   --download  fetch the public raw files from github.com/multi30k/dataset into --data-dir first
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
data_dir="$root/../shared/data/multi30k"
work="$root/work/multi30k"
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
ordo="$root/.venv/bin/ordo"
[ -x "$ordo" ] || make -C "$root" setup

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
if [ ! -f "$work/data/data.yaml" ]; then
  "$ordo" prepare "$here/prepare.yaml" --out "$work/data" \
    --train-src "$data_dir/train.en.gz" --train-tgt "$data_dir/train.de.gz" \
    --valid-src "$data_dir/valid.en.gz" --valid-tgt "$data_dir/valid.de.gz" \
    --test-src "$data_dir/test2016.en.gz" --test-tgt "$data_dir/test2016.de.gz"
fi
start=$(date +%s)
"$ordo" train "$here/train.yaml" --data "$work/data" --out "$work/run" --set "train.max_minutes=$minutes"
train_seconds=$(( $(date +%s) - start ))
"$ordo" average --model "$work/run" --last 5
for test in test2016 test2017; do
  zcat "$data_dir/$test.en.gz" > "$work/$test.en"
  zcat "$data_dir/$test.de.gz" > "$work/$test.de"
  for ckpt in best averaged; do
    "$ordo" translate --model "$work/run" --checkpoint "$ckpt" --input "$work/$test.en" --output "$work/$test.$ckpt.hyp"
    echo "== $test ($ckpt checkpoint)"
    "$ordo" evaluate --hyp "$work/$test.$ckpt.hyp" --ref "$work/$test.de" --tokenized-bleu
  done
done
echo "training wall time (incl. validation): ${train_seconds}s"
