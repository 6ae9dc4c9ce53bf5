#!/bin/bash
# The GPU check of ordo, device side (stage it first: bench/gpu/stage.sh says how to call it). Parts, by PARTS:
#   tests   the tests that need CUDA: a compiled bf16 step against the eager one, a compiled run's exact resume,
#           bf16 training and translation (pytest, those that skip without a GPU)
#   speed   target tokens/s of ordo eager, ordo compiled (train.compile default; at the base shape also with CUDA
#           graphs: reduce-overhead over lengths padded to multiples of 8) and fairseq 0.12 --fp16 in the same
#           call, on the same pieces and batches: the base preset at 25,000 tokens with 32k BPE pieces, and the
#           small preset at the Multi30k recipe's shape; MFU against the rated bf16 peak; peak memory
#   profile where an update's time goes, eager and compiled (bench/gpu/profile_step.py)
#   recipe  recipes/multi30k/train_gpu.yaml for RECIPE_MIN minutes, every checkpoint scored on test2016 (time
#           to fairseq's 36.60 and to 39.6), the last 4 averaged and scored on test2016 and test2017
# Measured on an H100 machine (bench/results/gpu_check_h100.md): each fairseq run about 40 s, each eager ordo run
# about 25 s, and each compiled one some 100 s of compilation (16 cores) before its first update. A session's
# 15 minutes of device time hold about two calls: PARTS=speed first (the default, about 7 minutes), then at once
# (the machine stays warm 30 s) PARTS=recipe (about 7); tests and profile in a later session. Results land in
# $OUT; put more than 8 files into a tarball there, since no more come back.
# RUNS names the speed runs to do (e.g. RUNS="base_fairseq base_compiled"); default all but base_graphs (CUDA
# graphs: another compilation of 100 s or more).
set -uo pipefail
export PYTHONUNBUFFERED=1
PARTS=${PARTS:-speed}
RECIPE_MIN=${RECIPE_MIN:-5}
BASE_UPDATES=${BASE_UPDATES:-100}
SMALL_UPDATES=${SMALL_UPDATES:-300}
R=$(pwd); G=$R/.gpu; W=/tmp/w; OUT=${OUT:-/tmp/out}
mkdir -p "$W" "$OUT"
log() { echo "[$(date +%T)] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$R"/.whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$R
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
python3 -c "import torch, fairseq; print('torch', torch.__version__, 'fairseq', fairseq.__version__)" | tee -a "$OUT/device.txt" || exit 4

has() { [[ " $PARTS " == *" $1 "* ]]; }
RUNS=${RUNS:-base_fairseq base_eager base_compiled small_fairseq small_eager small_compiled}
wanted() { [[ " $RUNS " == *" $1 "* ]]; }
fs() { python3 -c "import sys; from fairseq_cli.$1 import cli_main; sys.argv[0] = 'fairseq-$1'; cli_main()" "${@:2}"; }
ordo_train() {  # NAME DATA [--set ...]: a fixed number of updates, no checkpoints worth keeping
  wanted "$1" || return 0
  timeout 200 python3 -m ordo train recipes/multi30k/train.yaml --data "$2" --out "$W/$1" --set train.progress=false \
    --set train.valid_bleu=false --set train.valid_every=100000 --set train.log_every=20 --set train.threads=4 \
    "${@:3}" > "$OUT/$1.log" 2>&1 || log "$1 failed: $(tail -3 "$OUT/$1.log")"
}
fairseq_data() {  # DATA -> $W/bin_NAME: ordo's pieces, binarised by fairseq with a joined dictionary
  local name; name=$(basename "$1")
  [ -d "$W/bin_$name" ] && return
  python3 - "$1" "$W/text_$name" <<'EOF'
import os, sys, sentencepiece as spm
data, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
sp = spm.SentencePieceProcessor(model_file=f"{data}/spm.model")
for split in ("train", "valid"):
    for side, lang in (("src", "en"), ("tgt", "de")):
        with open(f"{data}/{split}.{side}.txt", encoding="utf-8") as lines, open(f"{out}/{split}.{lang}", "w", encoding="utf-8") as pieces:
            pieces.writelines(" ".join(sp.encode(line.rstrip("\n"), out_type=str)) + "\n" for line in lines)
EOF
  fs preprocess --source-lang en --target-lang de --trainpref "$W/text_$name/train" --validpref "$W/text_$name/valid" \
    --destdir "$W/bin_$name" --joined-dictionary --workers 16 > "$W/prep_$name.log" 2>&1 || tail -3 "$W/prep_$name.log"
}
FS_COMMON="--source-lang en --target-lang de --share-all-embeddings --criterion label_smoothed_cross_entropy --label-smoothing 0.1
  --optimizer adam --adam-betas (0.9,0.98) --lr-scheduler inverse_sqrt --fp16 --seed 1 --log-format simple --log-interval 20
  --num-workers 0 --no-save --disable-validation"
FS_SMALL="--arch transformer --encoder-embed-dim 256 --decoder-embed-dim 256 --encoder-ffn-embed-dim 1024 --decoder-ffn-embed-dim 1024
  --encoder-attention-heads 4 --decoder-attention-heads 4 --encoder-layers 3 --decoder-layers 3"
fairseq_train() {  # NAME DATA UPDATES [fairseq flags]
  wanted "$1" || return 0
  fairseq_data "$2"
  # shellcheck disable=SC2086
  (export -f fs; timeout 150 bash -c 'fs "$@"' fs train "$W/bin_$(basename "$2")" $FS_COMMON --max-update "$3" "${@:4}") \
    > "$OUT/$1.log" 2>&1 || log "$1 failed: $(tail -3 "$OUT/$1.log")"
}

if has tests; then
  log "tests that need CUDA"
  timeout 240 python3 -m pytest -q -p no:cacheprovider -rs tests/unit/test_compiled.py tests/integration/test_training.py \
    tests/integration/test_mixed_precision.py -k "gpu or cuda" 2>&1 | tee "$OUT/tests.log" | tail -5
fi

if has speed; then
  BASE=(--set model.preset=base --set model.dropout=0.1 --set train.max_tokens=25000 --set train.lr=0.0007
        --set train.warmup_steps=4000 --set "train.max_steps=$BASE_UPDATES")
  SMALL=(--set "train.max_steps=$SMALL_UPDATES")
  log "speed: base preset, 25,000 tokens, 32k pieces, $BASE_UPDATES updates each"
  fairseq_train base_fairseq "$G/m30k32k" "$BASE_UPDATES" --arch transformer --dropout 0.1 --lr 7e-4 --warmup-updates 4000 --max-tokens 25000
  ordo_train base_eager "$G/m30k32k" "${BASE[@]}" --set train.compile=off
  ordo_train base_compiled "$G/m30k32k" "${BASE[@]}" --set train.compile=default
  log "speed: small preset, the recipe's shape (3,000 tokens, dropout 0.2, 8k pieces), $SMALL_UPDATES updates each"
  fairseq_train small_fairseq "$G/m30k" "$SMALL_UPDATES" $FS_SMALL --dropout 0.2 --lr 1e-3 --warmup-updates 600 --max-tokens 3000
  ordo_train small_eager "$G/m30k" "${SMALL[@]}" --set train.compile=off
  ordo_train small_compiled "$G/m30k" "${SMALL[@]}" --set train.compile=default
  log "speed: base preset with CUDA graphs (reduce-overhead, lengths padded to multiples of 8), last: the lever least sure to pay"
  ordo_train base_graphs "$G/m30k32k" "${BASE[@]}" --set train.compile=reduce-overhead --set train.pad_multiple=8
  python3 bench/gpu/speed_table.py "$OUT" --data base="$G/m30k32k" --data small="$G/m30k" | tee "$OUT/speed.md"
fi

if has profile; then
  log "profile: base preset, 25,000 tokens, 32k pieces"
  timeout 300 python3 bench/gpu/profile_step.py recipes/multi30k/train.yaml --data "$G/m30k32k" --set model.preset=base \
    --set model.dropout=0.1 --set train.max_tokens=25000 --set train.threads=4 --compile off default \
    --out "$OUT/profile.md" > "$OUT/profile.log" 2>&1 || tail -5 "$OUT/profile.log"
  grep -E "^### |host wall|GPU kernel|kernels per|tokens per|MFU|peak GPU" "$OUT/profile.md"
fi

if has recipe; then
  log "recipe: recipes/multi30k/train_gpu.yaml, $RECIPE_MIN minutes"
  timeout $((RECIPE_MIN * 60 + 200)) python3 -m ordo train recipes/multi30k/train_gpu.yaml --data "$G/m30k" --out "$W/gpu_recipe" \
    --set train.progress=false --set "train.max_minutes=$RECIPE_MIN" > "$OUT/recipe_train.log" 2>&1 || tail -3 "$OUT/recipe_train.log"
  grep -E "tgt tok/s" "$OUT/recipe_train.log" | tail -2
  timeout 200 python3 bench/gpu/score_checkpoints.py "$W/gpu_recipe" --src "$G/test2016.en" --ref "$G/test2016.de" \
    --target 36.60 39.6 --test test2016 "$G/test2016.en" "$G/test2016.de" --test test2017 "$G/test2017.en" "$G/test2017.de" \
    | tee "$OUT/recipe.md"
fi
log done
