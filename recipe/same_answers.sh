#!/usr/bin/env bash
# Answers byte for byte, an older tree against this checkout: the parity corpus (recipe.parity's requests,
# seed 0, PER_CLASS of each of its six classes) through each tree's own `laya-run` with the cuda executor on
# BUNDLE and with the fp32 reference on the GPU. Prints and writes OUT/same-answers.txt: lines that differ.
#   recipe/same_answers.sh BASE CHECKPOINT BUNDLE OUT [PER_CLASS]
# BASE holds a whole older tree:   git archive COMMIT | tar -x -C BASE;  EXECUTORS="cuda reference" by default;
# NEW_ARGS: more laya-run arguments for this checkout only (--torch-readout: the readout a tree before the
# readout kernels ran)
set -uo pipefail
if [ "${1:-}" = "--help" ] || [ $# -lt 4 ]; then sed -n 2,8p "$0"; [ "${1:-}" = "--help" ]; exit; fi
base=$(cd "$1" && pwd) ckpt=$2 bundle=$3 out=$4 per_class=${5:-100}
mkdir -p "$out"
python3 -c 'import json, sys
from recipe.parity import generate
for _, payload in generate(int(sys.argv[1])):
    print(json.dumps(payload))' "$per_class" >"$out/corpus.jsonl"
# each tree's laya-run, from its own pyproject.toml
run() {  # TREE EXECUTOR OUTFILE [ARG ...]
  local module tree=$1 executor=$2 outfile=$3
  shift 3
  module=$(sed -n 's/^laya-run = "\(.*\):main"/\1/p' "$tree/pyproject.toml")
  (cd "$tree" && PYTHONPATH=$tree:${PYTHONPATH:-} python3 -c "import sys; from $module import main; sys.exit(main())" \
    "$ckpt" "$bundle" --executor "$executor" "$@" <"$out/corpus.jsonl" >"$outfile" 2>"$outfile.log")
}
for executor in ${EXECUTORS:-cuda reference}; do
  run "$base" "$executor" "$out/base-$executor.jsonl"
  # shellcheck disable=SC2086  # NEW_ARGS: words
  run "$PWD" "$executor" "$out/new-$executor.jsonl" ${NEW_ARGS:-}
  lines=$(wc -l <"$out/new-$executor.jsonl")
  differ=$(diff "$out/base-$executor.jsonl" "$out/new-$executor.jsonl" | grep -c '^>')
  echo "$executor: $differ of $lines answers differ (base $(wc -l <"$out/base-$executor.jsonl") lines)" \
    | tee -a "$out/same-answers.txt"
done
