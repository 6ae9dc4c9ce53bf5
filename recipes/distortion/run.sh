#!/usr/bin/env bash
# Paper 003 (distortion models) at an equal update budget per system.
# Ja->En (small_parallel_enja): RNNsearch* (rnn-small), +S, +T, +H distortion, and the Transformer baseline for
# reference; systems table (sign test against RNNsearch*) and the λ and l sweeps of H-Distortion (the paper's
# Figure 5; the λ = 0.5, l = 3 point is rnn_h_distortion). Zh->En (IWSLT17 TED, jieba-segmented, English
# lowercased, recipes/zhen_compare): RNNsearch* and +H distortion. Then alignment quality on each pair's gold
# set (KFTT Ja-En, Tsinghua Zh-En): AER of each RNN's attention (forced decoding), next to eflomal's AER on the
# same sentences (appended to the training text, as is standard), and attention plots of one sentence.
#
# usage: recipes/distortion/run.sh [--steps N] [--set KEY=VALUE ...] [--iwslt17 DIR] [--iwslt17-train DIR2]
#          [--work WORK]
#        (DIR, DIR2, WORK: as in recipes/lattice/run.sh; with DIR2 the Zh->En work folders get a _full suffix)
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
data="$root/../shared/data"
iwslt17_args "$@"
recipe_setup
"$py" -c "import jieba" 2>/dev/null || "$root/.venv/bin/pip" install -q "jieba>=0.42"

alignment_quality() {  # work dir of a suite, gold dir, source and target language, RNN systems...
  local work=$1 gold=$2 s=$3 t=$4 system
  shift 4
  local out="$work/reports/distortion"
  cat "$work/data/train.src.txt" "$gold/test.$s" > "$out/aer.$s"
  cat "$work/data/train.tgt.txt" "$gold/test.$t" > "$out/aer.$t"
  "$ordo" align --src "$out/aer.$s" --tgt "$out/aer.$t" --out "$out/aer.eflomal.all"
  tail -n "$(wc -l < "$gold/test.talp")" "$out/aer.eflomal.all" > "$out/aer.eflomal"
  {
    echo "== eflomal (grow-diag-final-and, trained with the training text)"
    "$ordo" evaluate-alignment --hyp "$out/aer.eflomal" --gold "$gold/test.talp"
    for system in "$@"; do
      "$ordo" align --model "$work/runs/$system" --checkpoint averaged --src "$gold/test.$s" --tgt "$gold/test.$t" \
        --out "$out/aer.$system" > /dev/null
      echo "== $system (attention, forced decoding)"
      "$ordo" evaluate-alignment --hyp "$out/aer.$system" --gold "$gold/test.talp"
    done
  } | tee "$out/aer.md"
  # one gold-set sentence, and one of the model's own (in-domain) test set
  attention_plots "$work" "$gold/test.$s" "$gold/test.$t" 2 "$out/gold"
  attention_plots "$work" "$work/data/test.src.txt" "$work/data/test.tgt.txt" 3 "$out/test"
}

attention_plots() {  # work dir of a suite, source file, reference file, line, output dir
  mkdir -p "$5"
  "$ordo" analyze attention --src "$2" --ref "$3" --line "$4" --out "$5" --checkpoint averaged \
    --run "rnnsearch=$1/runs/rnnsearch" --run "h_distortion=$1/runs/rnn_h_distortion"
}

"$py" "$here/../compare.py" --suite enja_compare --work "$work_root/enja_compare" --report distortion \
  rnnsearch rnn_s_distortion rnn_t_distortion rnn_h_distortion baseline \
  rnn_h_lambda@0.1 rnn_h_lambda@0.3 rnn_h_lambda@0.7 rnn_h_lambda@0.9 \
  rnn_h_window@1 rnn_h_window@2 rnn_h_window@4 rnn_h_window@5 ${args[@]+"${args[@]}"}
alignment_quality "$work_root/enja_compare" "$data/wa-jaen-kftt" ja en \
  rnnsearch rnn_s_distortion rnn_t_distortion rnn_h_distortion

# Zh->En: the IWSLT17 split of recipes/lattice/run.sh, segmented and lowercased like the Tsinghua gold set
iwslt17_folders iwslt17_zhen_segmented zhen_compare
iwslt17_zhen_split "$iwslt17" "$corpus" "$iwslt17_train"
for split in train valid test; do
  zcat "$corpus/$split.zh.gz" | "$py" "$here/../alignment/segment_zh.py" | gzip > "$corpus/$split.zh.seg.gz"
  mv "$corpus/$split.zh.seg.gz" "$corpus/$split.zh.gz"
  zcat "$corpus/$split.en.gz" | "$py" -c "import sys; sys.stdout.write(sys.stdin.read().lower())" \
    | gzip > "$corpus/$split.en.lc.gz"
  mv "$corpus/$split.en.lc.gz" "$corpus/$split.en.gz"
done
"$py" "$here/../compare.py" --suite zhen_compare --data-dir "$corpus" --work "$zhen_work" --report distortion \
  rnnsearch rnn_h_distortion baseline ${args[@]+"${args[@]}"}
alignment_quality "$zhen_work" "$data/wa-zhen-tsinghua" zh en rnnsearch rnn_h_distortion
