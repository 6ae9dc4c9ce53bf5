#!/usr/bin/env bash
# Paper 002 (lattice Transformer) at an equal update budget per system: En->De on Multi30k with subword
# lattices (BPE 2k/4k/8k), and Zh->En on the IWSLT17 TED sets with word lattices (jieba, thulac, characters).
# Systems: a 1-best system per segmentation, the lattice with normal PE, +LPE, +LSA, +LPE+LSA; tables (BLEU,
# sign test against the first system, parameters, training and translation speed) and BLEU by length.
# The sign test's reference is the first system named: rerun a report with the best 1-best system first
# (trained systems are reused, only translation runs again).
#
# usage: recipes/lattice/run.sh [--steps N] [--set KEY=VALUE ...] [--iwslt17 DIR] [--iwslt17-train DIR2]
#          [--work WORK]
#        DIR: the IWSLT17 Zh-En dev/test sets, default ../shared/data/iwslt17-zh-en; DIR2: the release's training
#        talks (train.tags.zh-en.zh/.en of IWSLT17 2017-01-trnted, ~231k pairs), added to the Zh->En training
#        side when given (work folders work/iwslt17_zhen_corpus_full and work/zhen_lattice_full); WORK: the
#        folder of the suites' work folders (default work/): WORK/m30k_lattice, WORK/zhen_lattice, ...
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
iwslt17_args "$@"
recipe_setup
"$py" "$here/../compare.py" --suite m30k_lattice --work "$work_root/m30k_lattice" --report lattice \
  onebest_spm2k onebest_spm4k onebest_spm8k lattice lattice_lpe lattice_lsa lattice_lpe_lsa ${args[@]+"${args[@]}"}

# Zh->En: the shared data has the IWSLT17 dev and test sets only; train on dev2010 + tst2010-2014 without
# the last 300 pairs of tst2014 (the dev set) and the training talks if given, test on tst2015-2017.
iwslt17_folders iwslt17_zhen_corpus zhen_lattice
iwslt17_zhen_split "$iwslt17" "$corpus" "$iwslt17_train"
"$py" "$here/../compare.py" --suite zhen_lattice --data-dir "$corpus" --work "$zhen_work" --report lattice \
  onebest_jieba onebest_thulac onebest_chars lattice lattice_lpe lattice_lsa lattice_lpe_lsa ${args[@]+"${args[@]}"}
