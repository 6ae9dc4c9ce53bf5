#!/usr/bin/env bash
# WMT14 En->De (4.5M pairs; newstest2013 dev, newstest2014 test): download and verify the release, prepare,
# train Transformer-base (train.yaml: 100,000 updates of ~25k tokens), average the last checkpoints,
# translate newstest2014 with beam 4, score with sacreBLEU against the prepared references, which are
# sacreBLEU's wmt14/full en-de test set (online: sacrebleu -t wmt14/full -l en-de -i HYP).
#
# usage: recipes/wmt14_ende/run.sh [--data-dir DIR] [--work DIR] [--download [--mirror URL]] [--gpus N]
#          [--minutes N] [--set KEY=VALUE ...]
#   --data-dir  folder with {train,valid,test}.{en,de}.gz (default: data/wmt14_ende)
#   --download  fetch the release (release.yaml: five archives from statmt.org, ~1.5 GB) into --data-dir first,
#               check every corpus's line count and write the splits; --mirror URL: from URL/NAME instead
#   --gpus N    train on N GPUs under torchrun; with --set train.update_freq=M, N x M = 6 keeps the batch size
#   --minutes N stop training after N minutes (default 0: at train.yaml's max_steps)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data_dir="$here/../../data/wmt14_ende"
work="$here/../../work/wmt14_ende"
src=en tgt=de train_split=train valid_split=valid tests="test" minutes_default=0 sacrebleu_test=wmt14/full

source "$here/../lib.sh"
recipe_main "$@"
