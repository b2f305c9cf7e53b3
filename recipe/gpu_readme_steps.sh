#!/usr/bin/env bash
# The README's "Run on a GPU" steps after the installs, as a GPU owner runs them, timed: build a bundle here,
# export its tables for CHECKPOINT, start laya-stack with the cuda executor (its own Redis and port), then the
# README's three example requests and GET /info. Writes OUT/steps.json; every command's output is in OUT.
#   recipe/gpu_readme_steps.sh CHECKPOINT OUT [BUILD_ARG ...]
# BUILD_ARGs go to `laya-bundle build` (--model tiny for a tiny checkpoint); LAYA_EXECUTOR (default cuda) may be
# set to reference to try the steps' mechanics on a machine without a GPU.
set -uo pipefail
if [ "${1:-}" = "--help" ] || [ $# -lt 2 ]; then sed -n 2,7p "$0"; [ "${1:-}" = "--help" ]; exit; fi
ckpt=$1 out=$2
shift 2
mkdir -p "$out"
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
api=$(port) redis=$(port)
results=()
timed() {  # NAME CMD...: runs CMD, its output in OUT/NAME.log, its status and milliseconds in steps.json
  local name=$1 start rc
  shift
  start=$(date +%s%N)
  "$@" >"$out/$name.log" 2>&1
  rc=$?
  results+=("{\"step\": \"$name\", \"exit\": $rc, \"ms\": $((($(date +%s%N) - start) / 1000000))}")
  echo "$name: exit $rc"
  return $rc
}
ready() {
  for _ in $(seq 600); do
    grep -q "laya-stack: ready at" "$out/stack.log" && return 0
    kill -0 "$stack" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}
timed build laya-bundle build "$out/bundle" "$@" && timed export-tables laya-bundle export-tables "$ckpt" "$out/bundle"
LAYA_API_PROCESSES=4 LAYA_EXECUTOR=${LAYA_EXECUTOR:-cuda} LAYA_CUDA_BUNDLE=$out/bundle LAYA_CHECKPOINT=$ckpt LAYA_PORT=$api \
  LAYA_REDIS_URL=redis://127.0.0.1:$redis/0 setsid laya-stack --redis-dir "$out/redis" >"$out/stack.log" 2>&1 &
stack=$!
timed ready ready
for kind in noul choice score; do
  timed "$kind" curl -sS --fail-with-body "http://127.0.0.1:$api/v1/systemone" -H 'Content-Type: application/json' \
    -d "@examples/$kind.json"
done
timed info curl -sS --fail-with-body "http://127.0.0.1:$api/info"
kill -INT "$stack"
wait "$stack"
(IFS=,; echo "[${results[*]}]") | python3 -m json.tool >"$out/steps.json"
