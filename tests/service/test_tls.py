"""rediss:// URLs: the worker and the API reach a TLS-only Redis (with a password) and serve through it."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from service.helpers import NOUL, Service, free_port, request_body, wait_for_redis

PASSWORD = "tls-password"


@pytest.fixture
def tls_redis_url(tmp_path):
    openssl, server = shutil.which("openssl"), shutil.which("redis-server")
    if openssl is None or server is None:
        pytest.skip("needs openssl and redis-server")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    port = free_port()
    popen = subprocess.Popen(
        [
            server,
            "--port",
            "0",
            "--tls-port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--tls-cert-file",
            str(cert),
            "--tls-key-file",
            str(key),
            "--tls-ca-cert-file",
            str(cert),
            "--tls-auth-clients",
            "no",
            "--requirepass",
            PASSWORD,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"rediss://:{PASSWORD}@127.0.0.1:{port}/0?ssl_ca_certs={cert}"  # certificates verified against this CA

    try:
        wait_for_redis(url, popen, "the TLS redis-server")
    except RuntimeError:
        pytest.skip("this redis-server was built without TLS")
    yield url
    popen.terminate()
    popen.wait(10)


@pytest.mark.optional  # skips where redis-server is built without TLS (or there is no openssl)
def test_the_service_runs_over_tls(tls_redis_url, launcher):
    service = Service(tls_redis_url)
    launcher.worker(service)
    launcher.api(service)
    service.wait_healthy()
    r = service.post("/v1/systemone", json=request_body("refund please", q=NOUL))
    assert r.status_code == 200, r.text
    job = service.post("/v1/jobs", json=request_body("refund please", q=NOUL)).json()
    assert service.wait_job(f"/v1/jobs/{job['id']}")["result"] == r.json()
    for process in service.processes:
        process.stop()
