#!/usr/bin/env bash
# Paper 000 (explicit reordering) at an equal update budget per system, on Ja->En (small_parallel_enja) and
# En->De (Multi30k test2016): baseline (two seeds), +ExGRE, +ReFSR, and the oracle of the paper's Figure 2 --
# the baseline trained and tested on sources put in target order by eflomal alignments learned on all splits
# (test references included, as the paper does). Systems tables and Sim (Eq. 12) of ExGRE/ReFSR.
#
# usage: recipes/exgre/run.sh [--steps N]
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
recipe_setup
for suite in enja_compare m30k_compare; do
  "$py" "$here/../compare.py" --suite "$suite" --report exgre baseline baseline_seed2 exgre exgre_soft refsr refsr_soft "$@"
  work="$root/work/$suite"
  "$ordo" analyze sim --data "$work/data" --run "exgre=$work/runs/exgre" --run "refsr=$work/runs/refsr" \
    --run "exgre_soft=$work/runs/exgre_soft" --run "refsr_soft=$work/runs/refsr_soft" --checkpoint averaged \
    | tee "$work/reports/exgre/sim.md"
  # the oracle corpus: every split's kept pairs with the source in target order
  read -r src tgt test <<<"$("$py" -c "import yaml; s = yaml.safe_load(open('$here/../$suite/suite.yaml'))
print(s['src'], s['tgt'], s['splits']['test'])")"
  oracle="$root/work/${suite}_oracle_corpus"
  mkdir -p "$oracle"
  for split in train valid test; do
    name=$split; [ "$split" = test ] && name=$test
    "$ordo" reorder --src "$work/data/$split.src.txt" --align "$work/data/$split.align" --out "$oracle/tmp.txt"
    gzip -c "$oracle/tmp.txt" > "$oracle/$name.$src.gz"
    gzip -c "$work/data/$split.tgt.txt" > "$oracle/$name.$tgt.gz"
  done
  rm -f "$oracle/tmp.txt"
  "$py" "$here/../compare.py" --suite "$suite" --data-dir "$oracle" --work "$root/work/${suite}_oracle" \
    --report oracle baseline "$@"
done
