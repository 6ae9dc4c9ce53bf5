# Shared steps of the recipes, sourced after setting here (the recipe's folder). A single-corpus recipe's
# run.sh also sets data_dir, work, src, tgt, train_split, valid_split and tests, defines download_data (or
# leaves it to fetch_release: the release.yaml beside run.sh, by recipes/fetch.py), then calls: recipe_main "$@". It may set minutes_default (the --minutes default: 60; 0: no wall-time limit, the
# train.yaml's max_steps ends training) and sacrebleu_test (sacreBLEU's name of its test set, printed beside
# the scores). A recipe with a budgets.yaml beside its run.sh (recipes/budgets.py) trains to the budget that
# --budget NAME picks (default: paper), its run and translations in WORK/NAME; one without trains to its
# train.yaml, in WORK. A comparison recipe calls recipe_setup and runs "$py" "$here/../compare.py" ....
set -euo pipefail
root="$(cd "$here/../.." && pwd)"
ordo="$root/.venv/bin/ordo"
py="$root/.venv/bin/python"

fetch_release() {  # download_data of a recipe with a release.yaml: fetch, verify and split the release
  "$py" "$here/../fetch.py" "$release" --data-dir "$data_dir" --mirror "$mirror"
}
declare -F download_data >/dev/null || download_data() { fetch_release; }

recipe_setup() {
  [ -x "$ordo" ] || make -C "$root" setup
}

recipe_usage() {
  echo "usage: $0 [--data-dir DIR] [--work DIR] [--budget NAME] [--minutes N] [--download] [--mirror URL]" \
    "[--release FILE] [--gpus N] [--set KEY=VALUE ...]" >&2
  exit 2
}

recipe_main() {  # --mirror URL: download_data fetches the release's files from URL/NAME (a local mirror, a
  # proxy); --release FILE: another description of the release than the recipe's release.yaml (a mirror's
  # layout or line counts); --budget NAME: a budget of the recipe's budgets.yaml (recipe_budget); --gpus N:
  # train on N GPUs of this machine under torchrun; --set KEY=VALUE: an ordo train override, over the budget's
  local minutes_arg="${minutes_default:-60}" download=0
  mirror="" release="$here/release.yaml" gpus=1 train_sets=() budget=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --data-dir) data_dir="$2"; shift 2 ;;
      --work) work="$2"; shift 2 ;;
      --budget) budget="$2"; shift 2 ;;
      --minutes) minutes_arg="$2"; shift 2 ;;
      --download) download=1; shift ;;
      --mirror) mirror="$2"; shift 2 ;;
      --release) release="$2"; shift 2 ;;
      --gpus) gpus="$2"; shift 2 ;;
      --set) train_sets+=(--set "$2"); shift 2 ;;
      *) recipe_usage ;;
    esac
  done
  minutes="$minutes_arg"
  recipe_setup
  recipe_budget
  if [ "$download" = 1 ]; then
    mkdir -p "$data_dir"
    download_data
  fi
  mkdir -p "$work" "$out"
  recipe_prepare
  recipe_train
  recipe_score
}

recipe_budget() {  # sets out (the folder of the run and its translations), average_last (the checkpoints
  # averaged) and budget_sets (ordo train overrides): budget NAME of the budgets.yaml beside run.sh
  # (recipes/budgets.py; an unknown NAME stops, naming the file) in WORK/NAME, else train.yaml's schedule in WORK
  out="$work" average_last=4 budget_sets=()
  if [ -f "$here/budgets.yaml" ] || [ -n "$budget" ]; then
    local assignments
    assignments="$("$py" "$root/recipes/budgets.py" "$here" ${budget:+"$budget"} --shell)"
    eval "$assignments"
    out="$work/$budget"
  fi
}

recipe_prepare() {
  local first_test="${tests%% *}"
  if [ ! -f "$work/data/data.yaml" ] && [ ! -f "$data_dir/$train_split.$src.gz" ]; then
    echo "error: no corpus in $data_dir ($train_split.$src.gz is missing): run with --download to fetch it there," \
      "or give the folder of your copy with --data-dir DIR" >&2
    exit 2
  fi
  if [ ! -f "$work/data/data.yaml" ]; then
    "$ordo" prepare "$here/prepare.yaml" --out "$work/data" \
      --train-src "$data_dir/$train_split.$src.gz" --train-tgt "$data_dir/$train_split.$tgt.gz" \
      --valid-src "$data_dir/$valid_split.$src.gz" --valid-tgt "$data_dir/$valid_split.$tgt.gz" \
      --test-src "$data_dir/$first_test.$src.gz" --test-tgt "$data_dir/$first_test.$tgt.gz"
  fi
}

recipe_train() {
  local start
  start=$(date +%s)
  local train=("$ordo")
  if [ "$gpus" -gt 1 ]; then
    train=("$root/.venv/bin/torchrun" --standalone --nproc_per_node "$gpus" -m ordo)
  fi
  "${train[@]}" train "$here/train.yaml" --data "$work/data" --out "$out/run" --set "train.max_minutes=$minutes" \
    ${budget_sets[@]+"${budget_sets[@]}"} ${train_sets[@]+"${train_sets[@]}"}
  echo "training wall time (validation included): $(( $(date +%s) - start ))s" | tee "$out/train_time.txt"
}

recipe_score() {
  "$ordo" average --model "$out/run" --last "$average_last"
  for test in $tests; do
    zcat "$data_dir/$test.$src.gz" > "$out/$test.$src"
    zcat "$data_dir/$test.$tgt.gz" > "$out/$test.$tgt"
    for ckpt in best averaged; do
      "$ordo" translate --model "$out/run" --checkpoint "$ckpt" --input "$out/$test.$src" \
        --output "$out/$test.$ckpt.hyp"
      echo "== $test ($ckpt checkpoint)"
      "$ordo" evaluate --hyp "$out/$test.$ckpt.hyp" --ref "$out/$test.$tgt" --tokenized-bleu
    done
  done
  if [ -n "${sacrebleu_test:-}" ]; then
    echo "the references are sacreBLEU's $sacrebleu_test $src-$tgt test set; online, sacreBLEU scores a" \
      "hypothesis against its own copy: sacrebleu -t $sacrebleu_test -l $src-$tgt -i HYP"
  fi
}

iwslt17_args() {  # sets iwslt17 (--iwslt17 DIR: the IWSLT17 Zh-En dev/test sets), iwslt17_train
  # (--iwslt17-train DIR: the release's training talks, train.tags.zh-en.{zh,en}; empty: none) and args (the rest)
  iwslt17="$root/../shared/data/iwslt17-zh-en"
  iwslt17_train=""
  args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --iwslt17) iwslt17="$2"; shift 2 ;;
      --iwslt17-train) iwslt17_train="$2"; shift 2 ;;
      *) args+=("$1"); shift ;;
    esac
  done
  local side
  for side in zh en; do
    if [ -n "$iwslt17_train" ] && [ ! -f "$iwslt17_train/train.tags.zh-en.$side" ]; then
      echo "error: --iwslt17-train $iwslt17_train has no train.tags.zh-en.$side (the IWSLT17 2017-01-trnted" \
        "zh-en release's training talks)" >&2
      exit 2
    fi
  done
}

iwslt17_folders() {  # corpus folder name, suite: sets corpus (the split's folder) and zhen_work (the suite's
  # work folder); with --iwslt17-train both get a _full suffix, so the two corpora never share prepared data
  local suffix=""
  [ -n "$iwslt17_train" ] && suffix="_full"
  corpus="$root/work/$1$suffix"
  zhen_work="$root/work/$2$suffix"
}

iwslt17_zhen_split() {  # dev/test sets dir, output dir[, training talks dir]: the talk-disjoint split, gzipped
  # train dev2010 + tst2010-2014 without the last 300 pairs of tst2014 (the dev set), test tst2015-2017; with a
  # training talks dir (the IWSLT17 release's train.tags.zh-en.*, ~231k pairs, talks of the dev/test sets
  # removed by the organizers), its transcript pairs come first on the training side
  local iwslt17=$1 corpus=$2 train_talks=${3:-} side split
  mkdir -p "$corpus"
  if [ -n "$train_talks" ]; then
    "$py" "$root/recipes/iwslt17_talks.py" "$train_talks" "$corpus/train.zh" "$corpus/train.en"
  else
    : > "$corpus/train.zh"
    : > "$corpus/train.en"
  fi
  for side in zh en; do
    zcat "$iwslt17"/{dev2010,tst2010,tst2011,tst2012,tst2013}."$side".gz >> "$corpus/train.$side"
    zcat "$iwslt17/tst2014.$side.gz" | head -n -300 >> "$corpus/train.$side"
    zcat "$iwslt17/tst2014.$side.gz" | tail -n 300 > "$corpus/valid.$side"
    zcat "$iwslt17"/{tst2015,tst2016,tst2017}."$side".gz > "$corpus/test.$side"
    for split in train valid test; do gzip -nf "$corpus/$split.$side"; done  # -n: the same bytes on every run
  done
}
