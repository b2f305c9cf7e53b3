#!/usr/bin/env bash
# The cuda executor checked on an H200 in one pass (at most the steps' limits below), from the root of a checkout that
# carries .gpu-site (shared/tools/make-gpu-site.sh .gpu-site --service) and bundles/{optimized,original,tiny}
# built on the CPU machine (laya-bundle build bundles/tiny --model tiny, ...):
#   recipe/gpu_check.sh OUT
# Steps, each with its own time limit and log: tests/kernels on both tile configurations; tests/gpu (the
# executor against the fp32 reference, tiny and large checkpoints); recipe.parity; the first numbers
# (recipe.benchmark with graphs, eager, and the reference executor); recipe.gemm_routes.
# OUT/gpu-check.tgz holds every log and output directory; OUT/steps.txt the status of each step.
set -uo pipefail
[ "${1:-}" = "--help" ] && { sed -n 2,9p "$0"; exit 0; }
out=${1:?usage: recipe/gpu_check.sh OUT}
work=/tmp/gpu-check
mkdir -p "$out" "$work"
source .gpu-site/env.sh
export PYTHONPATH=$PWD:$PYTHONPATH LAYA_GPU_WORKDIR=$work/ckpt

step() {
  local name=$1 limit=$2 start rc
  shift 2
  start=$(date +%s)
  timeout "$limit" "$@" >"$work/$name.log" 2>&1
  rc=$?
  echo "$name: exit $rc in $(($(date +%s) - start)) s" | tee -a "$out/steps.txt"
  tail -n 4 "$work/$name.log"
  tar -czf "$out/gpu-check.tgz" -C "$work" --exclude=ckpt .  # after every step: a later one may run out of time
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$work/gpu.txt"
cat "$work/gpu.txt"
ckpt=$work/ckpt/large/checkpoint
bundle=$work/ckpt/large/optimized
LAYA_TEST_BUNDLES=bundles/original:bundles/optimized step kernels 90 python3 -m pytest -q -p no:cacheprovider tests/kernels
step gpu-tests 210 python3 -m pytest -q -p no:cacheprovider -rf tests/gpu
step parity 120 python3 -m recipe.parity --checkpoint "$ckpt" --bundle "$bundle" --output "$work/parity"
step bench-graphs 60 python3 -m recipe.benchmark --checkpoint "$ckpt" --bundle "$bundle" --output "$work/bench-graphs"
step bench-eager 50 python3 -m recipe.benchmark --checkpoint "$ckpt" --bundle "$bundle" --output "$work/bench-eager" --eager
step bench-reference 75 python3 -m recipe.benchmark --checkpoint "$ckpt" --executor reference \
  --output "$work/bench-reference"
step routes 60 python3 -m recipe.gemm_routes --bundle bundles/optimized --output "$work/routes"
