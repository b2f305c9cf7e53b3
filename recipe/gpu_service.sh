#!/usr/bin/env bash
# The service with the cuda executor on the GPU machine: laya-stack (a private redis-server, one worker, the
# API), then /info, compare_with_backend (HTTP against laya-run --executor cuda: 0 answers may differ), an
# async job, and batch scoring end to end through /v1/batches. Then stops it all.
#   recipe/gpu_service.sh CHECKPOINT BUNDLE OUT
set -uo pipefail
[ "${1:-}" = "--help" ] && { sed -n 2,5p "$0"; exit 0; }
ckpt=${1:?usage: recipe/gpu_service.sh CHECKPOINT BUNDLE OUT} bundle=${2:?} out=${3:?}
mkdir -p "$out"
port=18080
url=http://127.0.0.1:$port
export LAYA_REDIS_URL=redis://127.0.0.1:16379/0 LAYA_PORT=$port LAYA_EXECUTOR=${LAYA_EXECUTOR:-cuda} LAYA_CHECKPOINT=$ckpt \
  LAYA_CUDA_BUNDLE=$bundle
laya-stack --redis-dir "$out/redis" >"$out/stack.log" 2>&1 &
stack=$!
trap 'kill $stack 2>/dev/null; wait $stack 2>/dev/null' EXIT
for _ in $(seq 240); do
  grep -q "ready at" "$out/stack.log" && break
  kill -0 $stack 2>/dev/null || { echo "laya-stack exited"; tail -20 "$out/stack.log"; exit 1; }
  sleep 0.5
done
python3 - "$url" "$out" <<'PY'
import json, sys, time, urllib.request
url, out = sys.argv[1], sys.argv[2]
def call(path, body=None):
    req = urllib.request.Request(url + path, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="GET" if body is None else "POST")
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, json.loads(r.read())
noul = {"type": "noul", "instructions": "Does the customer ask for a refund?"}
record = {"info": call("/info")[1], "sync": call("/v1/systemone", {"state": "refund please", "questions": {"q": noul}})}
status, job = call("/v1/jobs", {"state": "where is my parcel", "questions": {"q": noul}})
while (polled := call(f"/v1/jobs/{job['id']}")[1])["status"] not in ("done", "failed"):
    time.sleep(0.02)
record["job"] = polled
open(f"{out}/requests.json", "w").write(json.dumps(record, indent=1))
print("sync", record["sync"][0], "job", polled["status"], "executor", record["info"]["workers"][0]["info"]["executor"]["executor"])
PY
python3 -m recipe.compare_with_backend --frontend "$url" --checkpoint "$ckpt" --bundle "$bundle" --executor "$LAYA_EXECUTOR" \
  --output "$out/compare"
python3 -m recipe.batch_throughput --frontend "$url" --output "$out/batch"
