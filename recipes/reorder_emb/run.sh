#!/usr/bin/env bash
# Paper 001 (reordering embeddings) on small_parallel_enja Ja->En, equal update budget per system:
# baseline, +Additional PE, +Relative PE, +Encoder REs, +Decoder REs, +Both REs; systems table (BLEU, sign
# test, parameters, speeds), BLEU by source length, and the swapped-word robustness curves of baseline
# against +Both REs. Shares trained systems with the other Ja->En comparisons (recipes/enja_compare).
#
# usage: recipes/reorder_emb/run.sh [--steps N] [--set KEY=VALUE ...] [--work WORK] [--data-dir DIR]
#        WORK: the folder of the suites' work folders, as in the other comparison recipes (default work/): the
#        systems train in WORK/enja_compare; DIR: the corpus (default: the suite's, in ../shared/data)
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
suite_args "$@"
recipe_setup
exec "$py" "$here/../compare.py" --suite enja_compare --work "$work_root/enja_compare" --report reorder_emb \
  --robustness baseline,both_res \
  baseline baseline_seed2 additional_pe relative_pe encoder_res decoder_res both_res ${args[@]+"${args[@]}"}
