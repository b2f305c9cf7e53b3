# Sourced by recipe/gpu_session.sh on the GPU machine: the site, the work directory, `step`.
#   out=OUT work=/tmp/DIR; source recipe/gpu_steps.sh
# `step NAME SECONDS CMD...` runs CMD with a time limit and its log in $work/NAME.log, appends its status to
# $out/steps.txt and packs $work (checkpoints and stacks' Redis data aside) into $out/$(basename $work).tgz
# after every step, so a later step that runs out of time loses nothing before it.
mkdir -p "$out" "$work"
source .gpu-site/env.sh
export PYTHONPATH=$PWD:$PYTHONPATH LAYA_GPU_WORKDIR=/tmp/gpu-ckpt

step() {
  local name=$1 limit=$2 start rc
  shift 2
  start=$(date +%s)
  timeout "$limit" "$@" >"$work/$name.log" 2>&1
  rc=$?
  echo "$name: exit $rc in $(($(date +%s) - start)) s" | tee -a "$out/steps.txt"
  tail -n 4 "$work/$name.log"
  tar -czf "$out/$(basename "$work").tgz" --exclude=redis-data -C "$work" .  # a stack's append-only file: tens of MB
}
