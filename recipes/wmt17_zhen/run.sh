#!/usr/bin/env bash
# WMT17 Zh->En (~16.1M pairs, the public part of the task's data; newsdev2017 dev, newstest2017 test): download
# and verify the release, segment the Chinese with jieba (release.yaml), prepare, train Transformer-base
# to a budget of budgets.yaml (paper: 300,000 updates of 32,768 tokens; short: 100,000 of 24,576), average the
# last 5 checkpoints, translate newstest2017 with beam 5, score with sacreBLEU against the prepared references,
# which are sacreBLEU's wmt17 zh-en test set (online: sacrebleu -t wmt17 -l zh-en -i HYP).
#
# usage: recipes/wmt17_zhen/run.sh [--data-dir DIR] [--work DIR] [--download [--mirror URL]] [--release FILE]
#          [--budget paper|short] [--gpus N] [--minutes N] [--set KEY=VALUE ...]
#   --data-dir  folder with {train,valid,test}.{zh,en}.gz (default: data/wmt17_zhen)
#   --download  fetch the release (release.yaml: News Commentary v12, the UN corpus in two parts, dev and test,
#               ~2 GB) into --data-dir first, check the line counts it documents and write the splits;
#               --mirror URL: each file from URL/NAME instead; --release FILE: another description (your counts)
#   --budget    budgets.yaml's schedule (default paper, papers 000 and 004's; short: a quarter of its tokens);
#               the run and its translations in WORK/BUDGET
#   --gpus N    train on N GPUs under torchrun; with --set train.update_freq=M, N x M = the budget's update_freq
#               (8 paper, 6 short) keeps the batch size
#   --minutes N stop training after N minutes (default 0: at the budget's updates)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data_dir="$here/../../data/wmt17_zhen"
work="$here/../../work/wmt17_zhen"
src=zh tgt=en train_split=train valid_split=valid tests="test" minutes_default=0 sacrebleu_test=wmt17

source "$here/../lib.sh"
recipe_main "$@"
