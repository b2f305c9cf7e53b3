# Sourced by recipe/overhead_ab.sh and recipe/batch_ab.sh:
#   alternate BASE CHECKPOINT BUNDLE OUT ROUNDS CMD [ARG ...]
# runs `CMD ARG ... OUT/<variant>-<round>/result` on a fresh recipe.stack (the cuda executor with BUNDLE unless
# LAYA_EXECUTOR says otherwise; its logs in OUT/<variant>-<round>/logs), ROUNDS times for each variant in turn:
# base (BASE's app/, worker/ and laya_common/ first on PYTHONPATH), then new (this checkout).
alternate() {
  local base ckpt bundle out rounds r variant dir path
  base=$(cd "$1" && pwd) ckpt=$2 bundle=$3 out=$4 rounds=$5
  shift 5
  for r in $(seq "$rounds"); do
    for variant in base new; do
      dir=$out/$variant-$r
      path=$PYTHONPATH
      [ "$variant" = base ] && path=$base:$PYTHONPATH
      PYTHONPATH=$path LAYA_EXECUTOR=${LAYA_EXECUTOR:-cuda} LAYA_CUDA_BUNDLE=$bundle python3 -m recipe.stack \
        --checkpoint "$ckpt" --logs "$dir/logs" -- "$@" "$dir/result" | tail -n 8
    done
  done
}
