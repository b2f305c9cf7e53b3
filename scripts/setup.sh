#!/usr/bin/env bash
# Set up (idempotently) everything the service and its tests need, from nothing: a virtual environment
# in .venv with the project, its test and build extras, and redis-server. Safe to run again.
#   scripts/setup.sh            # then: .venv/bin/laya-stack   or   .venv/bin/python -m pytest -q
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then sed -n 2,4p "$0"; exit 0; fi
if ! command -v redis-server >/dev/null 2>&1; then
  echo "setup: installing redis-server" >&2
  (apt-get update -qq && apt-get install -y -qq redis-server) >/dev/null
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.setup-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  # torch is pinned here, before the project: on CPU machines 2.13.0 is the CPU build already on disk,
  # while an unpinned resolve would download a multi-GB CUDA build.
  .venv/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0 -e '.[dev,build]' 2>&1 \
    | grep -v 'is ignored: it is neither a file nor a directory' || true
  .venv/bin/python -c 'import torch, laya, celery, flask, tilelang' >/dev/null
  rm -f .venv/.setup-*; touch "$stamp"
fi
# Building a bundle (laya-bundle build, tests/bundle) needs the CUDA toolkit's nvcc and binutils, no GPU.
missing=""
for tool in nvcc objcopy objdump; do command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"; done
if [ -n "$missing" ]; then
  echo "setup: not on PATH:$missing. The bundle build and tests/bundle need nvcc from the CUDA 13.0 toolkit (with its" >&2
  echo "  headers and libcudart_static.a) and binutils: install NVIDIA's cuda-nvcc-13-0 and cuda-cudart-dev-13-0" >&2
  echo "  (apt, from https://developer.download.nvidia.com/compute/cuda/repos/) or the CUDA 13.0 toolkit, put its" >&2
  echo "  bin/ on PATH, apt-get install binutils, and run scripts/setup.sh again." >&2
  exit 1
fi
