#!/usr/bin/env bash
# AER of ordo align (eflomal, both directions, symmetrized) on the gold word-alignment sets, each appended to
# the training text that exists for its pair, as is standard (only the gold lines are scored):
#   De-En  wa-deen-rwth (508, Europarl) + Multi30k train (29k, Moses-tokenized, lowercased)
#   Ja-En  wa-jaen-kftt (582, KFTT)     + small_parallel_enja train (50k, KyTea-segmented)
#   Zh-En  wa-zhen-tsinghua (450 test)  + the IWSLT17 TED sets (12k, segmented with jieba)
# Text is lowercased before aligning; tokens are the gold files' (split on ASCII spaces).
#
# usage: recipes/alignment/run.sh [--work DIR] [--symmetrization grow-diag-final-and|intersection|union]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../lib.sh"
recipe_setup
"$py" -c "import jieba" 2>/dev/null || "$root/.venv/bin/pip" install -q "jieba>=0.42"
data="$root/../shared/data"
work="$root/work/alignment"
sym=grow-diag-final-and
while [ $# -gt 0 ]; do
  case "$1" in
    --work) work="$2"; shift 2 ;;
    --symmetrization) sym="$2"; shift 2 ;;
    *) echo "usage: $0 [--work DIR] [--symmetrization S]" >&2; exit 2 ;;
  esac
done
mkdir -p "$work"
lower() { "$py" -c "import sys; sys.stdout.write(sys.stdin.read().lower())"; }

pair() {  # name, gold dir, gold split, src lang, tgt lang; training text already in $work/$name.train.{src,tgt}
  local name=$1 gold=$2 split=$3 s=$4 t=$5
  lower < "$gold/$split.$s" > "$work/$name.gold.src"
  lower < "$gold/$split.$t" > "$work/$name.gold.tgt"
  cat "$work/$name.train.src" "$work/$name.gold.src" > "$work/$name.all.src"
  cat "$work/$name.train.tgt" "$work/$name.gold.tgt" > "$work/$name.all.tgt"
  "$ordo" align --src "$work/$name.all.src" --tgt "$work/$name.all.tgt" --out "$work/$name.all.align" \
    --symmetrization "$sym" > /dev/null
  tail -n "$(wc -l < "$gold/$split.talp")" "$work/$name.all.align" > "$work/$name.align"
  echo "== $name ($(wc -l < "$work/$name.train.src") training pairs + gold, eflomal, $sym)"
  "$ordo" evaluate-alignment --hyp "$work/$name.align" --gold "$gold/$split.talp"
}

zcat "$data/multi30k/tok/train.lc.norm.tok.de.gz" > "$work/deen.train.src"
zcat "$data/multi30k/tok/train.lc.norm.tok.en.gz" > "$work/deen.train.tgt"
zcat "$data/small_parallel_enja/train.ja.gz" > "$work/jaen.train.src"
zcat "$data/small_parallel_enja/train.en.gz" > "$work/jaen.train.tgt"
for set in dev2010 tst2010 tst2011 tst2012 tst2013 tst2014 tst2015 tst2016 tst2017; do
  zcat "$data/iwslt17-zh-en/$set.zh.gz"; done | "$py" "$here/segment_zh.py" > "$work/zhen.train.src"
for set in dev2010 tst2010 tst2011 tst2012 tst2013 tst2014 tst2015 tst2016 tst2017; do
  zcat "$data/iwslt17-zh-en/$set.en.gz"; done | lower > "$work/zhen.train.tgt"
{
  pair deen "$data/wa-deen-rwth" test de en
  pair jaen "$data/wa-jaen-kftt" test ja en
  pair zhen "$data/wa-zhen-tsinghua" test zh en
} | tee "$work/aer.md"
