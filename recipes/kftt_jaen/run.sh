#!/usr/bin/env bash
# KFTT Ja->En (440k pairs of Wikipedia articles on Kyoto): download and verify the release, prepare, train
# Transformer-base (train.yaml: 60,000 updates of ~8k tokens on one GPU), average the last checkpoints,
# translate kyoto-test with beam 5, score with sacreBLEU.
#
# usage: recipes/kftt_jaen/run.sh [--data-dir DIR] [--work DIR] [--download [--mirror URL]] [--gpus N]
#          [--minutes N] [--set KEY=VALUE ...]
#   --data-dir  folder with {train,valid,test}.{ja,en}.gz (default: data/kftt_jaen)
#   --download  fetch the release (release.yaml: kftt-data-1.0.tar.gz from phontron.com) into --data-dir
#               first, check each split's line count and write the splits; --mirror URL: from URL/NAME instead
#   --gpus N    train on N GPUs under torchrun (the global batch grows N-fold)
#   --minutes N stop training after N minutes (default 0: at train.yaml's max_steps)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data_dir="$here/../../data/kftt_jaen"
work="$here/../../work/kftt_jaen"
src=ja tgt=en train_split=train valid_split=valid tests="test" minutes_default=0

source "$here/../lib.sh"
recipe_main "$@"
