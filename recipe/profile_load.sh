#!/usr/bin/env bash
# recipe.load at 32 sync 1x77 clients on one worker (cuda executor) while py-spy samples the worker at 1 kHz
# without pausing it; its samples inside worker.service.back_to_back's loop are what the worker did per request.
#   recipe/profile_load.sh OUTDIR        (on the GPU machine, after `source recipe/gpu_steps.sh`; gpu_session.sh
#                                         step profile-load)
# py-spy: PY_SPY, else `py-spy` on PATH, else .gpu-site/py-spy.xz (the static binary of the py-spy wheel, xz'd to
# travel within the 64 MiB carry: pip download py-spy; unzip; xz -9 < py_spy-*.data/scripts/py-spy).
# Writes OUTDIR/load (load.json, samples.json), OUTDIR/worker.raw (py-spy's raw stacks) and the two logs.
set -u
[ "${1:-}" = "--help" ] && { sed -n 2,8p "$0"; exit 0; }
dir=${1:?usage: recipe/profile_load.sh OUTDIR}
mkdir -p "$dir"
spy=${PY_SPY:-$(command -v py-spy || true)}
if [ -z "$spy" ]; then
  spy=/tmp/py-spy && xz -dc .gpu-site/py-spy.xz > "$spy" && chmod +x "$spy"
fi
LAYA_EXECUTOR=cuda LAYA_CUDA_BUNDLE=$LAYA_GPU_WORKDIR/large/optimized timeout 200 python3 -m recipe.load \
  --checkpoint "$LAYA_GPU_WORKDIR/large/checkpoint" --output "$dir/load" --inputs 1x77 --clients 32 --seconds 20 \
  --workers 1 > "$dir/load.log" 2>&1 &
load=$!
pid=
for _ in $(seq 200); do pid=$(pgrep -f "bin/laya-worker" | head -1); [ -n "$pid" ] && break; sleep 0.2; done
echo "worker pid ${pid:-none}"
[ -n "$pid" ] && timeout 120 "$spy" record -p "$pid" -d 60 -r 1000 --nonblocking -f raw -o "$dir/worker.raw" \
  > "$dir/py-spy.log" 2>&1 &
wait $load
tail -n 3 "$dir/load.log" "$dir/py-spy.log"
