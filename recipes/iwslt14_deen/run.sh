#!/usr/bin/env bash
# IWSLT14 De->En (TED talks, 160k pairs; fairseq's split): download and verify the release, prepare, train
# Transformer-base (train.yaml: 50,000 updates of 4,096 tokens on one GPU), average the last checkpoints,
# translate the 6,750-pair test set with beam 5, score with sacreBLEU (cased, detokenized: not comparable with
# the lowercased, tokenized BLEU fairseq reports for its own preprocessing of this corpus).
#
# usage: recipes/iwslt14_deen/run.sh [--data-dir DIR] [--work DIR] [--download [--mirror URL]] [--gpus N]
#          [--minutes N] [--set KEY=VALUE ...]
#   --data-dir  folder with {train,valid,test}.{de,en}.gz (default: data/iwslt14_deen)
#   --download  fetch the release (release.yaml: fairseq's copy of WIT3's de-en.tgz) into --data-dir first,
#               check its test sets' line counts and write the splits; --mirror URL: from URL/de-en.tgz instead
#   --gpus N    train on N GPUs under torchrun (the global batch grows N-fold)
#   --minutes N stop training after N minutes (default 0: at train.yaml's max_steps)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data_dir="$here/../../data/iwslt14_deen"
work="$here/../../work/iwslt14_deen"
src=de tgt=en train_split=train valid_split=valid tests="test" minutes_default=0

source "$here/../lib.sh"
recipe_main "$@"
