#!/usr/bin/env bash
# Paper 004 (future cost): baseline, Model I and Model II (λ = 0.5) at an equal update budget, on Ja->En
# (small_parallel_enja) and En->De (Multi30k test2016): systems tables (BLEU, sign test, parameters,
# speeds) and BLEU by source-length group; on Ja->En also the λ sweep 0.1-0.9 of both models (the paper's
# Figure 3, here on the test set), plotted by compare.py. Shares the baselines with the other comparisons.
#
# usage: recipes/future_cost/run.sh [--steps N] [--set KEY=VALUE ...] [--work DIR]
#        DIR: the folder of the suites' work folders (default work/): DIR/m30k_compare, DIR/enja_compare
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
suite_args "$@"
recipe_setup
"$py" "$here/../compare.py" --suite m30k_compare --work "$work_root/m30k_compare" --report future_cost \
  baseline baseline_seed2 future_cost_1@0.5 future_cost_2@0.5 ${args[@]+"${args[@]}"}
"$py" "$here/../compare.py" --suite enja_compare --work "$work_root/enja_compare" --report future_cost \
  baseline baseline_seed2 future_cost_1@0.5 future_cost_2@0.5 \
  future_cost_1@0.1 future_cost_1@0.3 future_cost_1@0.7 future_cost_1@0.9 \
  future_cost_2@0.1 future_cost_2@0.3 future_cost_2@0.7 future_cost_2@0.9 ${args[@]+"${args[@]}"}
