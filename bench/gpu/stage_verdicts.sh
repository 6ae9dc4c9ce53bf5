#!/bin/bash
# Stages the verdict runs of a suite that needs a GPU (issue 40; default m30k_verdict, En->De) for a lent GPU
# machine, which has no word aligner and reaches no package registry: run it here, from the project's root, after
# `make setup`. It puts into the ignored folder .gpu/verdicts/:
#   tree/     the committed ordo/, recipes/ and pyproject.toml of COMMIT (default HEAD), with the runs recorded so
#             far under bench/results/hyps/CORPUS/ (the queue there skips them); commit: its name (ORDO_COMMIT)
#   shared/   the suite's corpus splits, where the tree finds them (../shared/data/CORPUS beside it)
#   tree/work/SUITE/data*  every system's data, prepared here by that tree (recipes/replicate.py prepare)
#   whl/      sacreBLEU 2.6 (ordo reads its significance classes; the GPU image may hold another version)
# Then one device call, which trains WORKERS runs side by side for MINUTES minutes and brings back what they
# recorded (bench/gpu/verdicts.sh):
#   run  command "bash bench/gpu/verdicts.sh"  carry [".gpu/verdicts"]  timeout_s 600
# SUITE names the suite, or several separated by spaces ("m30k_verdict enja_verdict": bench/gpu/verdicts.sh then
# gives each its share of the workers); DATA the corpus folder (default ../shared/data/CORPUS; for one suite).
# REDO names systems whose recorded runs the staged tree leaves out, so that the device trains all their seeds
# again on this staging's data: a system that reads word alignments (ExGRE, ReFSR) whose recorded seeds learnt
# from another preparation's alignment draw (eflomal draws anew each time; the tables refuse such a mix). Copy
# their runs back with `cp -r` (not -n), replacing the old ones.
set -euo pipefail
suites=${SUITE:-m30k_verdict}
[ -x .venv/bin/python ] || { echo "run from the project root after make setup" >&2; exit 2; }
commit=$(git rev-parse "${COMMIT:-HEAD}")
grep -qxF /.gpu/ .git/info/exclude 2>/dev/null || echo /.gpu/ >> .git/info/exclude
stage=.gpu/verdicts
tree=$stage/tree
rm -rf "$tree" "$stage/shared"
mkdir -p "$tree/bench/results/hyps" "$stage/whl"
git archive "$commit" ordo recipes pyproject.toml | tar -x -C "$tree"
echo "$commit" > "$stage/commit"
for suite in $suites; do
  read -r corpus src tgt splits < <(.venv/bin/python - "$suite" <<'EOF'
import sys, yaml
spec = yaml.safe_load(open(f"recipes/{sys.argv[1]}/suite.yaml"))
print(spec["corpus"], spec["src"], spec["tgt"], ",".join(spec["splits"].values()))
EOF
  )
  data=${DATA:-../shared/data/$corpus}
  mkdir -p "$stage/shared/data/$corpus"
  if [ -d "bench/results/hyps/$corpus" ]; then cp -r "bench/results/hyps/$corpus" "$tree/bench/results/hyps/"; fi
  for system in ${REDO:-}; do rm -f "$tree/bench/results/hyps/$corpus"/*/"$system".seed*.{txt,yaml}; done
  for split in ${splits//,/ }; do
    for lang in "$src" "$tgt"; do cp "$data/$split.$lang.gz" "$stage/shared/data/$corpus/"; done
  done
  ORDO_COMMIT=$commit PYTHONPATH=$tree .venv/bin/python "$tree/recipes/replicate.py" prepare --suite "$suite"
done
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  -d "$stage/whl" sacrebleu==2.6.0
echo "$suites" > "$stage/suite"
du -sh "$stage"
echo "staged $suites at ${commit:0:7}: device run with command \"bash bench/gpu/verdicts.sh\", carry [\".gpu/verdicts\"], timeout_s 600"
