#!/usr/bin/env bash
# Set up (idempotently) everything the service and its tests need, from nothing: a virtual environment
# in .venv with the project, its test and build extras, and redis-server. Safe to run again. Building a
# CUDA bundle needs nvcc too: without it everything else works, and this says how to get it.
#   scripts/setup.sh            # then: .venv/bin/laya-stack   or   .venv/bin/python -m pytest -q
#   scripts/setup.sh --gpu      # on a Hopper host: torch's CUDA 13 build instead of the CPU one; nvcc required
#                               # (README, "Run on a GPU": then build a bundle, export its tables, start the stack)
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h | --help) sed -n 2,7p "$0"; exit 0 ;;
  --gpu) gpu=1 ;;
  "") gpu="" ;;
  *) echo "setup: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
# Building a bundle (laya-bundle build, tests/bundle's build tests) needs the CUDA toolkit's nvcc and binutils,
# no GPU; the service, its CPU executor and every other test do not. --gpu is for building one: it stops first.
missing=""
for tool in nvcc objcopy objdump; do command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"; done
how="NVIDIA's cuda-nvcc-13-0 and cuda-cudart-dev-13-0 (apt, https://developer.download.nvidia.com/compute/cuda/repos/)
  or the CUDA 13.0 toolkit with its bin/ on PATH, and binutils (apt-get install binutils)"
if [ -n "$gpu" ] && [ -n "$missing" ]; then
  echo "setup: --gpu builds a bundle, which needs$missing: install $how." >&2
  exit 1
fi
if ! command -v redis-server >/dev/null 2>&1; then
  echo "setup: installing redis-server" >&2
  (apt-get update -qq && apt-get install -y -qq redis-server) >/dev/null
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.setup-${gpu:+gpu-}$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  # torch is pinned here, before the project: on CPU machines 2.13.0 is the CPU build already on disk,
  # while an unpinned resolve would download a multi-GB CUDA build. --gpu takes that CUDA 13 build on
  # purpose, the version the GPU tests run on.
  if [ -n "$gpu" ]; then
    .venv/bin/python -m pip install -q --disable-pip-version-check torch==2.11.0 \
      --index-url https://download.pytorch.org/whl/cu130
    torch=()
  else
    torch=(torch==2.13.0)
  fi
  .venv/bin/python -m pip install -q --disable-pip-version-check "${torch[@]}" -e '.[dev,build]' 2>&1 \
    | grep -v 'is ignored: it is neither a file nor a directory' || true
  .venv/bin/python -c 'import torch, laya, celery, flask, tilelang' >/dev/null
  # laya 0.4.15, protocol 0.4's oracle, beside 0.3.20 (the tests run it in a process of its own, this first on
  # its path): the package alone, and FastAPI and httpx to run its laya-serve in-process
  rm -rf .venv/laya-0.4.15
  .venv/bin/python -m pip install -q --disable-pip-version-check --target .venv/laya-0.4.15 --no-deps laya==0.4.15 2>&1 \
    | grep -v 'is ignored: it is neither a file nor a directory' || true
  .venv/bin/python -m pip install -q --disable-pip-version-check --target .venv/laya-0.4.15 fastapi httpx 2>&1 \
    | grep -v -e 'is ignored: it is neither a file nor a directory' -e 'bin already exists' || true
  rm -f .venv/.setup-*; touch "$stamp"
fi
if [ -n "$missing" ]; then
  echo "setup: done; not on PATH:$missing, which only building a CUDA bundle needs (those tests skip): install" >&2
  echo "  $how." >&2
fi
