#!/usr/bin/env bash
# Paper 003 (distortion models) on small_parallel_enja Ja->En at an equal update budget per system:
# RNNsearch* (rnn-small), +S, +T, +H distortion, and the Transformer baseline for reference; systems table
# (sign test against RNNsearch*) and the λ and l sweeps of H-Distortion (the paper's Figure 5; the
# λ = 0.5, l = 3 point is rnn_h_distortion). Then alignment quality: AER of each RNN's attention (forced decoding)
# on the KFTT gold set, next to eflomal's AER on the same sentences, and attention plots of one sentence.
#
# usage: recipes/distortion/run.sh [--steps N]
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
recipe_setup
"$py" "$here/../compare.py" --suite enja_compare --report distortion \
  rnnsearch rnn_s_distortion rnn_t_distortion rnn_h_distortion baseline \
  rnn_h_lambda@0.1 rnn_h_lambda@0.3 rnn_h_lambda@0.7 rnn_h_lambda@0.9 \
  rnn_h_window@1 rnn_h_window@2 rnn_h_window@4 rnn_h_window@5 "$@"
work="$root/work/enja_compare"
out="$work/reports/distortion"
gold="$root/../shared/data/wa-jaen-kftt"
# eflomal on the gold sentences, appended to the training text as is standard
cat "$work/data/train.src.txt" "$gold/test.ja" > "$out/aer.ja"
cat "$work/data/train.tgt.txt" "$gold/test.en" > "$out/aer.en"
"$ordo" align --src "$out/aer.ja" --tgt "$out/aer.en" --out "$out/aer.eflomal.all"
tail -n "$(wc -l < "$gold/test.talp")" "$out/aer.eflomal.all" > "$out/aer.eflomal"
{
  echo "== eflomal (grow-diag-final-and, trained with the Ja-En training text)"
  "$ordo" evaluate-alignment --hyp "$out/aer.eflomal" --gold "$gold/test.talp"
  for system in rnnsearch rnn_s_distortion rnn_t_distortion rnn_h_distortion; do
    "$ordo" align --model "$work/runs/$system" --checkpoint averaged --src "$gold/test.ja" --tgt "$gold/test.en" \
      --out "$out/aer.$system" > /dev/null
    echo "== $system (attention, forced decoding)"
    "$ordo" evaluate-alignment --hyp "$out/aer.$system" --gold "$gold/test.talp"
  done
} | tee "$out/aer.md"
"$ordo" analyze attention --src "$gold/test.ja" --ref "$gold/test.en" --line 2 --out "$out" --checkpoint averaged \
  --run "rnnsearch=$work/runs/rnnsearch" --run "h_distortion=$work/runs/rnn_h_distortion"
