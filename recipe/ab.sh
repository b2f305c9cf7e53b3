#!/usr/bin/env bash
# The service's one A/B: a recipe run on a fresh recipe.stack, alternately with an older tree of the service first
# on PYTHONPATH (base) and with this checkout (new), ROUNDS times, in one call on one machine:
#   recipe/ab.sh [--own-stack] BASE CHECKPOINT BUNDLE OUT ROUNDS CMD [ARG ...]
# Each run is `CMD ARG ... OUT/<variant>-<round>/result` on its own stack (the cuda executor with BUNDLE unless
# LAYA_EXECUTOR says otherwise; the stack's logs in OUT/<variant>-<round>/logs); with --own-stack, CMD is a recipe
# that starts its own (recipe.load: `... --checkpoint CHECKPOINT --output`). BASE holds the older app/, worker/ and
# laya_common/:   git archive COMMIT app worker laya_common | tar -x -C BASE
# recipe/gpu_session.sh's steps overhead-ab, batch-ab and load-ab run it with recipe.http_overhead,
# recipe.batch_throughput and recipe.load; each run's own output is the record, compared variant by variant.
set -uo pipefail
own_stack=0
[ "${1:-}" = "--own-stack" ] && { own_stack=1; shift; }
if [ "${1:-}" = "--help" ] || [ $# -lt 6 ]; then sed -n 2,10p "$0"; [ "${1:-}" = "--help" ]; exit; fi
base=$(cd "$1" && pwd) ckpt=$2 bundle=$3 out=$4 rounds=$5
shift 5
pythonpath=${PYTHONPATH:-}
for r in $(seq "$rounds"); do
  for variant in base new; do
    dir=$out/$variant-$r
    path=$pythonpath
    [ "$variant" = base ] && path=$base:$pythonpath
    export PYTHONPATH=$path LAYA_EXECUTOR=${LAYA_EXECUTOR:-cuda} LAYA_CUDA_BUNDLE=$bundle
    if [ $own_stack = 1 ]; then
      "$@" "$dir/result" | tail -n 8
    else
      python3 -m recipe.stack --checkpoint "$ckpt" --logs "$dir/logs" -- "$@" "$dir/result" | tail -n 8
    fi
  done
done
