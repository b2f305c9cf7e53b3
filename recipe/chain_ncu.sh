#!/usr/bin/env bash
# Nsight Compute inside two encoder layers' kernels (recipe/chain_ncu.py), one profile a bucket:
#   recipe/chain_ncu.sh CHECKPOINT BUNDLE OUT BUCKET...     BUCKET: RxL, or RxL:split for the split-K GEMMs
# OUT/BUCKET.ncu-rep (ncu's report), .csv (its raw page: every metric, one row a kernel), .md (the summary).
# Clocks are left as the card has them (--clock-control none): the device machines are shared (its METHOD.md).
set -euo pipefail
[ "${1:-}" = "--help" ] && { sed -n 2,5p "$0"; exit 0; }
ckpt=${1:?usage: recipe/chain_ncu.sh CHECKPOINT BUNDLE OUT BUCKET...} bundle=${2:?} out=${3:?}
shift 3
mkdir -p "$out"
for bucket in "$@"; do
  name=${bucket/:/-}
  split=()
  [ "${bucket#*:}" = split ] && split=(--split-k)
  ncu --profile-from-start off --clock-control none --cache-control all --force-overwrite \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section MemoryWorkloadAnalysis --export "$out/$name" \
    python3 -m recipe.chain_ncu run --checkpoint "$ckpt" --bundle "$bundle" --bucket "${bucket%%:*}" \
    --steps "$out/$name.steps.json" "${split[@]}"
  ncu --import "$out/$name.ncu-rep" --csv --page raw >"$out/$name.csv"
  python3 -m recipe.chain_ncu summary "$out/$name.csv" "$out/$name.steps.json" | tee "$out/$name.md"
done
