#!/usr/bin/env bash
# The cuda executor checked on an H200 in one pass (about 6 minutes), from the root of a checkout that
# carries .gpu-site (shared/tools/make-gpu-site.sh .gpu-site --service) and bundles/{optimized,original,tiny}
# built on the CPU machine (laya-bundle build bundles/tiny --model tiny, ...):
#   recipe/gpu_check.sh OUT
# Steps, each with its own time limit and log: tests/kernels on both tile configurations (and a candidate
# bundle named by LAYA_CANDIDATE); tests/gpu (the executor against the fp32 reference, tiny and large
# checkpoints); recipe.parity; recipe.benchmark (graphs and eager); the service with the cuda executor
# (recipe/gpu_service.sh); recipe.engine_profile; recipe.gemm_routes; with
# LAYA_CANDIDATE, the candidate's attention kernels timed against the optimized bundle's.
# OUT/gpu-check.tgz holds every log and output directory; OUT/steps.txt the status of each step.
# Checkpoints and bundles with exported tables stay in /tmp/gpu-ckpt for the next script on a warm machine.
set -uo pipefail
[ "${1:-}" = "--help" ] && { sed -n 2,10p "$0"; exit 0; }
out=${1:?usage: recipe/gpu_check.sh OUT}
work=/tmp/gpu-check
source recipe/gpu_steps.sh

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$work/gpu.txt"
cat "$work/gpu.txt"
ckpt=$LAYA_GPU_WORKDIR/large/checkpoint
bundle=$LAYA_GPU_WORKDIR/large/optimized
step prepare 150 python3 -m recipe.gpu_workdir large:bundles/optimized large:bundles/original tiny:bundles/tiny
LAYA_TEST_BUNDLES=bundles/original:bundles/optimized${LAYA_CANDIDATE:+:$LAYA_CANDIDATE} \
  step kernels 90 python3 -m pytest -q -p no:cacheprovider tests/kernels
step gpu-tests 210 python3 -m pytest -q -p no:cacheprovider -rf tests/gpu
step parity 120 python3 -m recipe.parity --checkpoint "$ckpt" --bundle "$bundle" --output "$work/parity"
step bench-graphs 60 python3 -m recipe.benchmark --checkpoint "$ckpt" --bundle "$bundle" --output "$work/bench-graphs"
step bench-eager 60 python3 -m recipe.benchmark --checkpoint "$ckpt" --bundle "$bundle" --output "$work/bench-eager" --eager
step service 120 recipe/gpu_service.sh "$ckpt" "$bundle" "$work/service"
step profile 120 python3 -m recipe.engine_profile --checkpoint "$ckpt" --bundle "$bundle" --output "$work/profile"
step routes 90 python3 -m recipe.gemm_routes --bundle bundles/optimized --output "$work/routes"
if [ -n "${LAYA_CANDIDATE:-}" ]; then  # a candidate bundle's attention against the optimized one
  step attention 60 python3 -m recipe.kernel_bench --bundle bundles/optimized --bundle "$LAYA_CANDIDATE" \
    --entry attn_fwd_global_bf16 --entry attn_fwd_local_bf16 --output "$work/attention"
fi
