#!/usr/bin/env bash
# IWSLT16 En->De (TED talks, the WIT3 2016-01 release; paper 002's IWSLT setting): download and verify the
# release, prepare (separate 16k BPE SentencePiece models, training pairs with a side over 50 words dropped),
# train Transformer-base with dropout 0.3 to a budget of budgets.yaml (paper: 100,000 updates of 1,024 x 16
# tokens; short: 25,000), average the last 5 checkpoints, translate tst2014 (test) and tst2013 with beam 20,
# score with sacreBLEU against the prepared references (tst2012 is the dev set). The lattice systems of paper
# 002 on this corpus are recipes/iwslt16_verdict's.
#
# usage: recipes/iwslt16_ende/run.sh [--data-dir DIR] [--work DIR] [--download [--mirror URL]] [--release FILE]
#          [--budget paper|short] [--gpus N] [--minutes N] [--set KEY=VALUE ...]
#   --data-dir  folder with {train,valid,test,tst2013}.{en,de}.gz (default: data/iwslt16_ende)
#   --download  fetch the release (release.yaml: WIT3's 2016-01.tgz, every language pair, from Google Drive;
#               en-de.tgz is unpacked from it) into --data-dir first, check the dev and test sets' segment
#               counts and write the splits; --mirror URL: URL/2016-01.tgz instead; an en-de.tgz already in
#               DATA_DIR/release/ is used without fetching the whole release
#   --budget    budgets.yaml's schedule (default paper: paper 002's batch, Vaswani et al.'s updates and
#               warm-up; short: a quarter of its updates); the run and its translations in WORK/BUDGET
#   --gpus N    train on N GPUs under torchrun; with --set train.update_freq=M, N x M = 16 keeps the batch size
#               (one GPU, one batch an update: --set train.max_tokens=16384 --set train.update_freq=1)
#   --minutes N stop training after N minutes (default 0: at the budget's updates)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data_dir="$here/../../data/iwslt16_ende"
work="$here/../../work/iwslt16_ende"
src=en tgt=de train_split=train valid_split=valid tests="test tst2013" minutes_default=0

source "$here/../lib.sh"
recipe_main "$@"
