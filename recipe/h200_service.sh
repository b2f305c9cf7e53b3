#!/usr/bin/env bash
# The service's measurements on the H200 host, in one bounded run (about 4 minutes), from the repo root:
#   source .gpu-site/env.sh        # Celery, Flask, redis-server and this project's console scripts
#   [LAYA_EXECUTOR=cuda LAYA_CUDA_BUNDLE=DIR] recipe/h200_service.sh CHECKPOINT OUT
# Each step starts its own redis-server (free port), laya-worker (LAYA_EXECUTOR from the environment,
# default auto) and laya-api, writes under OUT, and stops them:
#   OUT/http-overhead/samples.json  issue 9: 1,000 sync samples one at a time, 8 and 32 clients, stage
#                                   times per sample, the bare Celery floor per pool (recipe/http_overhead.py)
#   OUT/load/load.json              issue 10: 1, 8, 32, 128 clients, one worker then two (recipe/load.py)
#   OUT/gpu-fault/faults.json       issue 10: an executor failure under load, with a real CUDA error
#                                   (LAYA_FAULT=cuda, recipe/faulty_executor.py) when torch sees a GPU, and with LAYA_EXECUTOR=cuda
#                                   a checkpoint with one changed byte refused (recipe/faults.py)
# PYTHON overrides the interpreter (default python3). Exit status: the first step that failed, else 0.
set -uo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then sed -n 2,13p "$0"; exit 0; fi
[ $# -eq 2 ] || { sed -n 2,13p "$0" >&2; exit 2; }
cd "$(dirname "$0")/.."
ckpt=$(realpath "$1"); out=$(realpath -m "$2"); py=${PYTHON:-python3}
mkdir -p "$out"
command -v redis-server >/dev/null || { echo "h200_service: no redis-server on PATH (source .gpu-site/env.sh)" >&2; exit 2; }
{ date -u; nvidia-smi -L 2>&1; "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
  git rev-parse HEAD 2>/dev/null; env | grep '^LAYA_' | grep -v -i 'key\|password'; } > "$out/machine.txt"
status=0
step() {  # step NAME SECONDS CMD...: run with a time limit, remember the first failure
  local name=$1 limit=$2; shift 2
  echo "h200_service: $name" >&2
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$out/$name.log"
  local rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || { echo "h200_service: $name failed ($rc)" >&2; [ "$status" -ne 0 ] || status=$rc; }
}
step http-overhead 120 "$py" -m recipe.stack --checkpoint "$ckpt" --logs "$out/http-overhead/logs" -- \
  "$py" -m recipe.http_overhead --output "$out/http-overhead" --samples 1000 --per-client 40
step load 120 "$py" -m recipe.load --checkpoint "$ckpt" --output "$out/load" --seconds 4
fault=raise
"$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && fault=cuda
faults=executor-failure
[ "${LAYA_EXECUTOR:-}" = cuda ] && faults=executor-failure,tampered-checkpoint  # the bundle records the hashes
LAYA_FAULT=$fault step gpu-fault 100 "$py" -m recipe.faults --checkpoint "$ckpt" --output "$out/gpu-fault" \
  --faults "$faults"
echo "h200_service: done (status $status); everything is in $out" >&2
exit "$status"
