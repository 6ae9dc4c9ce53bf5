#!/bin/bash
# The verdict runs on a lent GPU machine, device side (stage them first: bench/gpu/stage_verdicts.sh says how to
# call it). WORKERS (default 12) workers of `recipes/replicate.py queue --suite SUITE` (the staged suites taking
# turns) train side by side in the staged tree for MINUTES (default 9) minutes, seed by seed across each suite's
# systems, each run at the staged commit (ORDO_COMMIT) on the data prepared here; a run is recorded when it
# finishes, and one the time limit cuts off is lost with the machine, so no worker starts a run after START
# minutes (default half of MINUTES).
# Measured: on an H100 (En->De, bf16, one CPU thread a run) the defaults recorded 23 runs in 541 s, none cut off
# (2.1-6.1 training minutes a run side by side); on an H200 nine workers did 11 runs in 5.6 minutes.
# One call of 10 minutes and the machine's start use most of a session's 15 minutes of device time (some 5
# minutes were left after the H100 call above).
# Back in $OUT: device.txt (the GPU, torch, the runs pending before and the files recorded after) and
# verdicts.tgz (bench/results/hyps/CORPUS/ as the workers left it, and each worker's log in logs/). Here, with
# FILES_AT the reply's files_at:
#   mkdir -p /tmp/back && tar -xzf FILES_AT/verdicts.tgz -C /tmp/back
#   cp -rn /tmp/back/bench/results/hyps/CORPUS/SET bench/results/hyps/CORPUS/   (SET: the GPU's set, e.g.
#   gpu-nvidia-h100-80gb-hbm3-bf16; `cp -r` for the systems staged with REDO), then
#   `python recipes/replicate.py rehash --suite SUITE --work .gpu/verdicts/tree/work/SUITE` (a staged commit before
#   data_hashes records only data_hash: this adds the hashes of what each run read, from the staged data), commit
#   the new files, then `python recipes/replicate.py tables`
set -uo pipefail
export PYTHONUNBUFFERED=1
S=$(pwd)/.gpu/verdicts
T=$S/tree
OUT=${OUT:-/tmp/out}
WORKERS=${WORKERS:-12}
MINUTES=${MINUTES:-9}
START=${START:-$(awk "BEGIN { print $MINUTES / 2 }")}
SUITE=${SUITE:-$(cat "$S/suite")}
mkdir -p "$OUT" /tmp/logs
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$S"/whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$T ORDO_COMMIT
ORDO_COMMIT=$(cat "$S/commit")
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/device.txt"
python3 -c "import torch, sacrebleu; print('torch', torch.__version__, 'sacrebleu', sacrebleu.__version__)" \
  | tee -a "$OUT/device.txt" || exit 4
cd "$T" || exit 5
read -r -a suites <<< "$SUITE"
python3 recipes/replicate.py pending "${suites[@]/#/--suite=}" | tee -a "$OUT/device.txt"
for worker in $(seq "$WORKERS"); do  # the suites take turns: each has its share of the workers
  suite=${suites[$(( (worker - 1) % ${#suites[@]} ))]}
  timeout "${MINUTES}m" python3 recipes/replicate.py queue --suite "$suite" --threads 1 \
    --start-within "$START" > "/tmp/logs/queue_$worker.log" 2>&1 &
  sleep 2  # each worker takes the next run no other holds (a lock per run); nothing to prepare (staged)
done
wait
echo "recorded:" >> "$OUT/device.txt"
find bench/results/hyps -name '*.yaml' -newer "$S/commit" | sort | tee -a "$OUT/device.txt"
tar -czf "$OUT/verdicts.tgz" bench/results/hyps -C /tmp logs
