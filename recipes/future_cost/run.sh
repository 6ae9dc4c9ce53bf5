#!/usr/bin/env bash
# Paper 004 (future cost): baseline, Model I and Model II at an equal update budget, on Ja->En
# (small_parallel_enja) and En->De (Multi30k test2016): systems tables (BLEU, sign test, parameters,
# speeds) and BLEU by source-length group. Shares the baselines with the other comparisons.
#
# usage: recipes/future_cost/run.sh [--steps N]
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
recipe_setup
for suite in enja_compare m30k_compare; do
  "$py" "$here/../compare.py" --suite "$suite" --report future_cost \
    baseline baseline_seed2 future_cost_1 future_cost_2 "$@"
done
