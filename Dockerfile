# Images by role, all from one wheel built once in the `wheel` stage (docker-compose.yml builds `api` and `worker`):
#   api     slim Python with the base install (Flask, Celery, Redis client, gunicorn): no torch, no compiler, non-root
#   worker  CUDA 13 runtime with torch 2.11.0 built for CUDA 13 (what the GPU tests ran on) and the [worker] extra;
#           the bundle is mounted at LAYA_CUDA_BUNDLE
#   bundle  the CUDA toolkit (nvcc) with TileLang (the [build] extra): compiles a bundle into a mounted directory
# The commit reported by --version comes from a build argument, as .git stays out of the build context:
#   docker build --target api --build-arg GIT_COMMIT=$(git rev-parse HEAD) .
ARG CUDA_VERSION=13.0.0
ARG TORCH_VERSION=2.11.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cu130

FROM python:3.11-slim AS wheel
WORKDIR /src
RUN pip install --no-cache-dir build==1.6.1
COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY laya_common ./laya_common
COPY app ./app
COPY worker ./worker
COPY kernels ./kernels
COPY bundle ./bundle
ARG GIT_COMMIT=""
RUN LAYA_GIT_COMMIT="$GIT_COMMIT" python -m build --wheel --outdir /dist .

FROM python:3.11-slim AS api
COPY --from=wheel /dist /dist
RUN pip install --no-cache-dir /dist/*.whl && rm -r /dist \
    && useradd --create-home --uid 10001 laya
USER laya
ENV LAYA_HOST=0.0.0.0 LAYA_PORT=8080
EXPOSE 8080
CMD ["laya-api"]

# Ubuntu's Python (3.12) in a virtual environment; torch from its CUDA 13 index, the rest from PyPI.
FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu24.04 AS worker
ARG TORCH_VERSION
ARG TORCH_INDEX
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/laya && useradd --create-home --uid 10001 laya
ENV PATH=/opt/laya/bin:$PATH
RUN pip install --no-cache-dir --index-url "$TORCH_INDEX" "torch==$TORCH_VERSION"
COPY --from=wheel /dist /dist
RUN whl=$(ls /dist/*.whl) && pip install --no-cache-dir "$whl[worker]" && rm -r /dist
USER laya
ENV LAYA_CHECKPOINT=/checkpoint LAYA_CUDA_BUNDLE=/bundle
CMD ["laya-worker"]

# Compiling a bundle needs nvcc, not a GPU (its RoPE tables are computed on one where present):
#   docker compose --profile bundle run --rm bundle
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04 AS bundle
ARG TORCH_VERSION
ARG TORCH_INDEX
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv python3-dev binutils \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/laya
ENV PATH=/opt/laya/bin:$PATH
RUN pip install --no-cache-dir --index-url "$TORCH_INDEX" "torch==$TORCH_VERSION"
COPY --from=wheel /dist /dist
RUN whl=$(ls /dist/*.whl) && pip install --no-cache-dir "$whl[worker,build]" && rm -r /dist
CMD ["laya-bundle", "build", "/bundle", "--config", "optimized"]
