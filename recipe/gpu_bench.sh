#!/usr/bin/env bash
# The benchmark against every peer, the service, and ABBA on an H200 (about 9 minutes), from the root of a
# checkout carrying .gpu-site (make-gpu-site.sh --service) and bundles/{optimized,original}:
#   recipe/gpu_bench.sh OUT
# Steps: recipe.benchmark --compare (laya stock bf16, laya fast, laya-cuda; batch scoring); recipe.abba with
# CUDA graphs, then eager; the service's own measurements (recipe/h200_service.sh) with the cuda executor.
# OUT/gpu-bench.tgz holds every log and output directory; OUT/steps.txt the status of each step.
set -uo pipefail
[ "${1:-}" = "--help" ] && { sed -n 2,7p "$0"; exit 0; }
out=${1:?usage: recipe/gpu_bench.sh OUT}
work=/tmp/gpu-bench
source recipe/gpu_steps.sh

ckpt=$LAYA_GPU_WORKDIR/large/checkpoint
step prepare 150 python3 -m recipe.gpu_workdir large:bundles/optimized large:bundles/original
optimized=$LAYA_GPU_WORKDIR/large/optimized
original=$LAYA_GPU_WORKDIR/large/original
step compare 260 python3 -m recipe.benchmark --checkpoint "$ckpt" --bundle "$optimized" --compare \
  --output "$work/compare"
step abba-graphs 130 python3 -m recipe.abba --checkpoint "$ckpt" --optimized "$optimized" --original "$original" \
  --output "$work/abba-graphs"
step abba-eager 140 python3 -m recipe.abba --checkpoint "$ckpt" --optimized "$optimized" --original "$original" \
  --output "$work/abba-eager" --eager
LAYA_EXECUTOR=cuda LAYA_CUDA_BUNDLE=$optimized step h200-service 250 recipe/h200_service.sh "$ckpt" "$work/h200-service"
