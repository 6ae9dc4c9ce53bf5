#!/usr/bin/env bash
# Paper 000 (explicit reordering) at an equal update budget per system, on Ja->En (small_parallel_enja) and
# En->De (Multi30k test2016): baseline (two seeds), +ExGRE, +ReFSR, and the oracle of the paper's Figure 2 --
# the baseline trained and tested on sources put in target order by eflomal alignments learned on all splits
# (test references included, as the paper does). Systems tables and Sim (Eq. 12) of ExGRE/ReFSR.
#
# usage: recipes/exgre/run.sh [--steps N] [--set KEY=VALUE ...] [--work DIR]
#        DIR: the folder of the suites' work folders (default work/): DIR/enja_compare, DIR/m30k_compare and
#        their oracles DIR/SUITE_oracle (a second seed: --set train.seed=2 --work work/seed2)
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
suite_args "$@"
recipe_setup
for suite in enja_compare m30k_compare; do
  work="$work_root/$suite"
  "$py" "$here/../compare.py" --suite "$suite" --work "$work" --report exgre \
    baseline baseline_seed2 exgre exgre_soft refsr refsr_soft ${args[@]+"${args[@]}"}
  "$ordo" analyze sim --data "$work/data" --run "exgre=$work/runs/exgre" --run "refsr=$work/runs/refsr" \
    --run "exgre_soft=$work/runs/exgre_soft" --run "refsr_soft=$work/runs/refsr_soft" --checkpoint averaged \
    | tee "$work/reports/exgre/sim.md"
  # the oracle corpus: every split's kept pairs with the source in target order
  read -r src tgt test <<<"$("$py" -c "import sys, yaml; s = yaml.safe_load(open(sys.argv[1]))
print(s['src'], s['tgt'], s['splits']['test'])" "$here/../$suite/suite.yaml")"
  oracle="$work_root/${suite}_oracle_corpus"
  mkdir -p "$oracle"
  for split in train valid test; do
    name=$split; [ "$split" = test ] && name=$test
    "$ordo" reorder --src "$work/data/$split.src.txt" --align "$work/data/$split.align" --out "$oracle/tmp.txt"
    gzip -c "$oracle/tmp.txt" > "$oracle/$name.$src.gz"
    gzip -c "$work/data/$split.tgt.txt" > "$oracle/$name.$tgt.gz"
  done
  rm -f "$oracle/tmp.txt"
  "$py" "$here/../compare.py" --suite "$suite" --data-dir "$oracle" --work "$work_root/${suite}_oracle" \
    --report oracle baseline ${args[@]+"${args[@]}"}
done
