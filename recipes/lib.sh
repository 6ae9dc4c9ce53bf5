# Shared steps of the recipes, sourced after setting here (the recipe's folder). A single-corpus recipe's
# run.sh also sets data_dir, work, src, tgt, train_split, valid_split and tests, defines download_data (or
# leaves it to fetch_release: the release.yaml beside run.sh, by recipes/fetch.py; download_file fetches one
# file), then calls: recipe_main "$@" (a recipe that writes its corpus itself first, as aspec_jaen, calls
# recipe_args, recipe_setup and recipe_budget before that step, then recipe_run). It may set minutes_default
# (the --minutes default: 60; 0: no wall-time limit, the train.yaml's max_steps ends training) and
# sacrebleu_test (sacreBLEU's name of its test set, printed beside the scores). A recipe with a budgets.yaml
# beside its run.sh (recipes/budgets.py) trains to the budget that --budget NAME picks (default: paper), its
# run and translations in WORK/NAME; one without trains to its train.yaml, in WORK. A comparison recipe calls
# suite_args "$@" (or iwslt17_args) and recipe_setup, and runs "$py" "$here/../compare.py" --suite SUITE --work
# "$work_root/SUITE" .... Sourcing lib.sh checks the script's arguments before any work (recipe_check_args:
# --help, an option without its value).
set -euo pipefail
root="$(cd "$here/../.." && pwd)"
ordo="$root/.venv/bin/ordo"
py="$root/.venv/bin/python"

fetch_release() {  # download_data of a recipe with a release.yaml: fetch, verify and split the release
  "$py" "$here/../fetch.py" "$release" --data-dir "$data_dir" --mirror "$mirror"
}
declare -F download_data >/dev/null || download_data() { fetch_release; }

download_file() {  # URL FILE [gzip]: URL's content into FILE (gzipped on the way with "gzip"), written whole
  # or not at all: a failed transfer leaves no FILE that a later run (without --download) takes for the corpus
  local part="$2.part"
  if ! command -v curl >/dev/null; then
    echo "error: --download needs curl; or put the corpus files in $(dirname "$2") yourself" >&2
    exit 2
  fi
  if [ "${3:-}" = gzip ]; then
    curl -fsSL "$1" | gzip -n > "$part" || { rm -f "$part"; echo "error: could not download $1" >&2; exit 2; }
  else
    curl -fsSL "$1" -o "$part" || { rm -f "$part"; echo "error: could not download $1" >&2; exit 2; }
  fi
  mv "$part" "$2"
}

recipe_setup() {
  [ -x "$ordo" ] || make -C "$root" setup
}

recipe_header() {  # the comment at the top of the running script: what the recipe does, its usage
  awk 'NR == 1 { next } !/^#/ { exit } { sub(/^# ?/, ""); print }' "$0"
}

recipe_check_args() {  # the script's arguments, checked before any work: -h or --help prints recipe_header
  # and exits; a last argument that is an option other than --download (every other option of the recipes
  # takes a value) stops with an error naming it, where bash would stop at "$2: unbound variable"
  local arg last
  for arg in "$@"; do
    case "$arg" in -h|--help) recipe_header; exit 0 ;; esac
  done
  [ $# -gt 0 ] || return 0
  last="${!#}"
  case "$last" in
    --download) ;;
    --*)
      echo "error: $last: its value is missing, or it is no option of this recipe (usage: $0 --help)" >&2
      exit 2 ;;
  esac
}

recipe_usage() {  # an unknown flag $1: the flags of recipe_main, and where the recipe's own are
  echo "error: unknown option $1" >&2
  echo "usage: $0 [--data-dir DIR] [--work DIR] [--budget NAME] [--minutes N] [--download] [--mirror URL]" \
    "[--release FILE] [--gpus N] [--set KEY=VALUE ...] (what each does: $0 --help)" >&2
  exit 2
}

recipe_args() {  # the flags of recipe_main into data_dir, work, budget, minutes, download, mirror, release,
  # gpus and train_sets; an unknown flag stops with the usage before any work (a recipe that writes its
  # corpus first, as aspec_jaen, reads its flags with this before that step). --mirror URL: download_data
  # fetches the release's files from URL/NAME (a local mirror, a proxy); --release FILE: another description
  # of the release than the recipe's release.yaml (a mirror's layout or line counts); --budget NAME: a budget
  # of the recipe's budgets.yaml (recipe_budget); --gpus N: train on N GPUs of this machine under torchrun;
  # --set KEY=VALUE: an ordo train override, over the budget's
  minutes="${minutes_default:-60}" download=0 mirror="" release="$here/release.yaml" gpus=1 train_sets=()
  budget=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --data-dir) data_dir="$2"; shift 2 ;;
      --work) work="$2"; shift 2 ;;
      --budget) budget="$2"; shift 2 ;;
      --minutes) minutes="$2"; shift 2 ;;
      --download) download=1; shift ;;
      --mirror) mirror="$2"; shift 2 ;;
      --release) release="$2"; shift 2 ;;
      --gpus) gpus="$2"; shift 2 ;;
      --set) train_sets+=(--set "$2"); shift 2 ;;
      *) recipe_usage "$1" ;;
    esac
  done
  if ! [[ "$gpus" =~ ^[1-9][0-9]*$ ]]; then  # else recipe_train's test fails, and it trains on one process
    echo "error: --gpus $gpus: expected a number of GPUs (1, 2, ...)" >&2
    exit 2
  fi
}

recipe_main() {  # the whole recipe: its flags (recipe_args), the budget, then recipe_run
  recipe_args "$@"
  recipe_setup
  recipe_budget
  recipe_run
}

recipe_run() {  # with the flags read and the budget set: download (--download), prepare, train, score
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

recipe_prepare() {  # WORK/data from the corpus in data_dir, once: a rerun reuses it, and refuses it for another
  # corpus folder (WORK/data/corpus_dir.txt names the one it was prepared from), whose test set the model of
  # the first would otherwise be scored on
  local first_test="${tests%% *}" corpus stamp="$work/data/corpus_dir.txt"
  corpus="$(cd "$data_dir" 2>/dev/null && pwd || echo "$data_dir")"
  if [ -f "$work/data/data.yaml" ]; then
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" != "$corpus" ]; then
      echo "error: $work/data was prepared from the corpus in $(cat "$stamp"), not $corpus: give this corpus" \
        "its own --work folder" >&2
      exit 2
    fi
    return 0
  fi
  if [ ! -f "$data_dir/$train_split.$src.gz" ]; then
    echo "error: no corpus in $data_dir ($train_split.$src.gz is missing): run with --download to fetch it there," \
      "or give the folder of your copy with --data-dir DIR" >&2
    exit 2
  fi
  "$ordo" prepare "$here/prepare.yaml" --out "$work/data" \
    --train-src "$data_dir/$train_split.$src.gz" --train-tgt "$data_dir/$train_split.$tgt.gz" \
    --valid-src "$data_dir/$valid_split.$src.gz" --valid-tgt "$data_dir/$valid_split.$tgt.gz" \
    --test-src "$data_dir/$first_test.$src.gz" --test-tgt "$data_dir/$first_test.$tgt.gz"
  echo "$corpus" > "$stamp"
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

suite_args() {  # a recipe that runs several suites: sets work_root (--work DIR: the folder of the suites' work
  # folders, DIR/SUITE; default work/) and args (the others, passed on to each compare.py). compare.py's own
  # --work names one suite's folder: given to every suite, they would all train in it, and the second would be
  # refused (its data is another corpus's)
  work_root="$root/work"
  args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --work) work_root="$2"; shift 2 ;;
      *) args+=("$1"); shift ;;
    esac
  done
}

iwslt17_args() {  # suite_args, and sets iwslt17 (--iwslt17 DIR: the IWSLT17 Zh-En dev/test sets) and
  # iwslt17_train (--iwslt17-train DIR: the release's training talks, train.tags.zh-en.{zh,en}; empty: none)
  iwslt17="$root/../shared/data/iwslt17-zh-en"
  iwslt17_train=""
  local rest=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --iwslt17) iwslt17="$2"; shift 2 ;;
      --iwslt17-train) iwslt17_train="$2"; shift 2 ;;
      *) rest+=("$1"); shift ;;
    esac
  done
  suite_args ${rest[@]+"${rest[@]}"}
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
  # work folder), both in work_root; with --iwslt17-train both get a _full suffix, so the two corpora never
  # share prepared data
  local suffix=""
  [ -n "$iwslt17_train" ] && suffix="_full"
  corpus="$work_root/$1$suffix"
  zhen_work="$work_root/$2$suffix"
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

recipe_check_args "$@"  # lib.sh is sourced without arguments: these are the running script's own
