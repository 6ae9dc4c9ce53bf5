#!/usr/bin/env bash
# KFTT Ja->En (440k pairs of Wikipedia articles on Kyoto): download and verify the release, prepare, train
# Transformer-base to a budget of budgets.yaml (paper: 66,000 updates of 32,768 tokens, ASPEC's paper schedule
# scaled to KFTT's size; short: 60,000 of 8,192), average the last 5 checkpoints, translate kyoto-test with
# beam 5, score with sacreBLEU.
#
# usage: recipes/kftt_jaen/run.sh [--data-dir DIR] [--work DIR] [--download [--mirror URL]] [--gpus N]
#          [--budget paper|short] [--minutes N] [--set KEY=VALUE ...]
#   --data-dir  folder with {train,valid,test}.{ja,en}.gz (default: data/kftt_jaen)
#   --download  fetch the release (release.yaml: kftt-data-1.0.tar.gz from phontron.com) into --data-dir
#               first, check each split's line count and write the splits; --mirror URL: from URL/NAME instead
#   --budget    budgets.yaml's schedule (default paper: paper 000's ASPEC batch, updates scaled to as many
#               passes over KFTT; short: 0.23 of its tokens); the run and its translations in WORK/BUDGET
#   --gpus N    train on N GPUs under torchrun; with --set train.update_freq=M, N x M = the budget's update_freq
#               (8 paper, 2 short) keeps the batch size
#   --minutes N stop training after N minutes (default 0: at the budget's updates)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data_dir="$here/../../data/kftt_jaen"
work="$here/../../work/kftt_jaen"
src=ja tgt=en train_split=train valid_split=valid tests="test" minutes_default=0

source "$here/../lib.sh"
recipe_main "$@"
