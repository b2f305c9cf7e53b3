# One image for both the API and the worker; docker-compose.yml picks the command.
# The CUDA executor needs a CUDA-enabled torch and the bundle mounted at LAYA_CUDA_BUNDLE.
FROM python:3.11-slim
WORKDIR /srv/laya
COPY pyproject.toml ./
COPY app ./app
COPY worker ./worker
COPY kernels ./kernels
COPY bundle ./bundle
COPY recipe ./recipe
RUN pip install --no-cache-dir -e .
ENV LAYA_HOST=0.0.0.0 LAYA_PORT=8080
EXPOSE 8080
CMD ["laya-api"]
