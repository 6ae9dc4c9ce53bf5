#!/bin/bash
# Stages the GPU check (bench/gpu/check.sh) for a lent GPU machine, which reaches no package registry: run it
# here, from the project's root, after `make setup`. It puts into the ignored folders .gpu/ and .whl/:
# fairseq 0.12 and the dependencies that machine lacks as wheels (fairseq is the peer measured beside ordo),
# Multi30k prepared by ordo twice (the recipe's 8k unigram pieces, and 32k BPE pieces for the base-preset
# speed figure; the same pieces serve both toolkits) and the raw test sets. Then one device call:
#   run  command "bash bench/gpu/check.sh"  carry [".gpu", ".whl"]  timeout_s 480
# and, at once (the machine stays warm for 30 s), the recipe's time to quality:
#   run  command "PARTS=recipe bash bench/gpu/check.sh"  carry [".gpu", ".whl"]  timeout_s 420
# DATA names the Multi30k folder (train/valid/test2016/test2017 .en/.de, gzipped).
set -euo pipefail
data=${DATA:-../shared/data/multi30k}
[ -x .venv/bin/ordo ] || { echo "run from the project root after make setup" >&2; exit 2; }
for folder in /.gpu/ /.whl/; do grep -qxF "$folder" .git/info/exclude 2>/dev/null || echo "$folder" >> .git/info/exclude; done
mkdir -p .gpu .whl
platforms="--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any"
# shellcheck disable=SC2086
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $platforms \
  -d .whl fairseq-fixed==0.12.3.1 hydra-core==1.3.2 omegaconf==2.3.0 bitarray
.venv/bin/python -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
splits=(--train-src "$data/train.en.gz" --train-tgt "$data/train.de.gz"
        --valid-src "$data/valid.en.gz" --valid-tgt "$data/valid.de.gz")
[ -f .gpu/m30k/data.yaml ] || .venv/bin/ordo prepare recipes/multi30k/prepare.yaml --out .gpu/m30k "${splits[@]}"
[ -f .gpu/m30k32k/data.yaml ] || .venv/bin/ordo prepare recipes/multi30k/prepare.yaml --out .gpu/m30k32k \
  --vocab-size 32000 --model-type bpe "${splits[@]}"
for test in test2016 test2017; do
  for lang in en de; do zcat "$data/$test.$lang.gz" > ".gpu/$test.$lang"; done
done
du -sh .gpu .whl
echo 'staged: device run with command "bash bench/gpu/check.sh", carry [".gpu", ".whl"], timeout_s 480'
