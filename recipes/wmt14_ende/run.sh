#!/usr/bin/env bash
# WMT14 En->De (4.5M pairs; newstest2013 dev, newstest2014 test): download and verify the release, prepare,
# train Transformer-base to a budget of budgets.yaml (paper: 300,000 updates of 32,768 tokens; short: 100,000 of
# 24,576), average the last 5 checkpoints, translate newstest2014 with beam 4, score with sacreBLEU against the
# prepared references, which are sacreBLEU's wmt14/full en-de test set (online: sacrebleu -t wmt14/full -l
# en-de -i HYP).
#
# usage: recipes/wmt14_ende/run.sh [--data-dir DIR] [--work DIR] [--download [--mirror URL]] [--gpus N]
#          [--budget paper|short] [--minutes N] [--set KEY=VALUE ...]
#   --data-dir  folder with {train,valid,test}.{en,de}.gz (default: data/wmt14_ende)
#   --download  fetch the release (release.yaml: five archives from statmt.org, ~1.5 GB) into --data-dir first,
#               check every corpus's line count and write the splits; --mirror URL: from URL/NAME instead
#   --budget    budgets.yaml's schedule (default paper, papers 000 and 004's; short: a quarter of its tokens);
#               the run and its translations in WORK/BUDGET
#   --gpus N    train on N GPUs under torchrun; with --set train.update_freq=M, N x M = the budget's update_freq
#               (8 paper, 6 short) keeps the batch size
#   --minutes N stop training after N minutes (default 0: at the budget's updates)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data_dir="$here/../../data/wmt14_ende"
work="$here/../../work/wmt14_ende"
src=en tgt=de train_split=train valid_split=valid tests="test" minutes_default=0 sacrebleu_test=wmt14/full

source "$here/../lib.sh"
recipe_main "$@"
