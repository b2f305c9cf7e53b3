"""Driving the real service from tests: processes (laya-worker, laya-api), HTTP, waiting, laya-run."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import requests

from worker.commands.stack import wait_until

REDIS_PASSWORD = "laya-test-password"
API_KEY = "laya-test-key"
HEARTBEAT_TTL_S = 3  # short, so a stopped worker's readiness expires within the test
STARTUP_TIMEOUT_S = 180  # worker load + warmup on a loaded 2-core machine
STACK_STARTUP_TIMEOUT_S = 300  # laya-stack: synthesizing checkpoints, then workers warming up side by side
BIN = Path(sys.executable).parent
CHECKOUT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_redis(url: str, popen: subprocess.Popen, what: str, timeout_s: float = 10) -> None:
    """Until the redis-server `popen` started answers PING at `url`; RuntimeError if it exits first."""
    import redis

    def pings():
        if popen.poll() is not None:
            raise RuntimeError(f"{what} exited with {popen.returncode}")
        try:
            return redis.Redis.from_url(url).ping()
        except redis.ConnectionError:
            return False

    wait_until(pings, timeout_s, what)


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: Path

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""


@dataclass
class Service:
    """One API (and usually one worker) on one Redis database."""

    redis_url: str
    base_url: str = ""
    processes: list[Process] = field(default_factory=list)
    http: requests.Session = field(default_factory=requests.Session)

    def __post_init__(self) -> None:
        self.http.headers["Authorization"] = f"Bearer {API_KEY}"

    def url(self, path: str) -> str:
        return self.base_url + path

    def get(self, path: str, **kw) -> requests.Response:
        return self.http.get(self.url(path), timeout=60, **kw)

    def post(self, path: str, **kw) -> requests.Response:
        return self.http.post(self.url(path), timeout=60, **kw)

    def redis(self):
        import redis

        return redis.Redis.from_url(self.redis_url)

    def workers(self) -> list[dict]:
        """Every live worker's record, as the workers write it in Redis (what /health counts)."""
        from laya_common import contract

        return contract.read_workers(self.redis())

    def wait_healthy(self, timeout_s: float = STARTUP_TIMEOUT_S) -> dict:
        def ready():
            for p in self.processes:
                if p.popen.poll() is not None:
                    raise RuntimeError(f"{p.name} exited with {p.popen.returncode}:\n{p.tail()}")
            try:
                r = self.http.get(self.url("/health"), timeout=5)
            except requests.ConnectionError:
                return None
            return r.json() if r.status_code == 200 else None

        return wait_until(ready, timeout_s, f"{self.base_url}/health to answer 200", interval_s=0.25)

    def wait_job(self, path: str, timeout_s: float = 60) -> dict:
        def finished():
            body = self.get(path).json()
            return body if body["status"] in ("done", "failed") else None

        return wait_until(finished, timeout_s, f"{path} to finish")


class Launcher:
    """Starts laya-worker and laya-api processes with logs in a temporary directory; stops them all at the end."""

    def __init__(self, logs: Path, checkpoint: Path) -> None:
        self.logs, self.checkpoint, self.started = logs, checkpoint, []

    def _start(self, name: str, cmd: list[str], env: dict) -> Process:
        log = self.logs / f"{name}-{len(self.started)}.log"
        # the checkout first: a worker may run a recipe's executor (LAYA_EXECUTOR=recipe.faulty_executor:make), and
        # recipes are not installed with the package
        path = os.pathsep.join(filter(None, (str(CHECKOUT), os.environ.get("PYTHONPATH"))))
        full_env = {**os.environ, "PYTHONPATH": path, "LAYA_API_KEY": API_KEY, **env}
        with open(log, "wb") as out:
            popen = subprocess.Popen(cmd, env=full_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        process = Process(name, popen, log)
        self.started.append(process)
        return process

    def worker(self, service: Service, *, checkpoint: Path | None = None, **env: str) -> Process:
        process = self._start(
            "worker",
            [str(BIN / "laya-worker"), "--loglevel", "warning"],
            {
                "LAYA_REDIS_URL": service.redis_url,
                "LAYA_CHECKPOINT": str(checkpoint or self.checkpoint),
                "LAYA_EXECUTOR": "reference",
                "LAYA_DEVICE": "cpu",
                "LAYA_HEARTBEAT_TTL_S": str(HEARTBEAT_TTL_S),
                "LAYA_BATCH_CHUNK": "4",
                **env,
            },
        )
        service.processes.append(process)
        return process

    def api(self, service: Service, *, bin_dir: Path = BIN, **env: str) -> Process:
        """laya-api (from `bin_dir`: another installation's) serving `service`."""
        port = free_port()
        process = self._start(
            "api",
            [str(bin_dir / "laya-api")],
            {
                "LAYA_REDIS_URL": service.redis_url,
                "LAYA_HOST": "127.0.0.1",
                "LAYA_PORT": str(port),
                "LAYA_API_CONNECTIONS": "2048",
                "LAYA_TRACE": "1",
                **env,
            },
        )
        service.base_url = f"http://127.0.0.1:{port}"
        service.processes.append(process)
        wait_until(lambda: _answers(service.base_url), 30, f"laya-api on port {port}")
        return process

    def stop_all(self) -> None:
        for process in reversed(self.started):
            process.stop()


def stack_env(home: Path, redis_url: str, api_port: int, **more: str) -> dict[str, str]:
    """laya-stack's environment in tests: its Redis, its API port, its cache in `home`, the reference executor."""
    return {
        "PATH": str(BIN) + ":/usr/bin:/bin",
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / "cache"),
        "LAYA_REDIS_URL": redis_url,
        "LAYA_PORT": str(api_port),
        "LAYA_EXECUTOR": "reference",
        "LAYA_DEVICE": "cpu",
        **more,
    }


@contextlib.contextmanager
def laya_stack(tmp_path: Path, *args: str):
    """`laya-stack ARGS` with its own Redis and cache under `tmp_path`, until ready; yields (API URL, Redis URL).

    On exit it is stopped with Ctrl-C and must exit 0.
    """
    redis_port, api_port = free_port(), free_port()
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    env = stack_env(tmp_path, redis_url, api_port)
    log = tmp_path / "stack.log"
    with open(log, "wb") as out:
        stack = subprocess.Popen([str(BIN / "laya-stack"), *args], env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(
            lambda: stack.poll() is None and "ready at" in log.read_text(), STACK_STARTUP_TIMEOUT_S, "laya-stack: ready"
        )
        yield f"http://127.0.0.1:{api_port}", redis_url
    finally:
        stack.send_signal(signal.SIGINT)
        assert stack.wait(60) == 0, log.read_text()[-3000:]


def _answers(base_url: str) -> bool:
    try:
        requests.get(base_url + "/health", timeout=2)
        return True
    except requests.ConnectionError:
        return False


def post_concurrently(service: Service, bodies: list[dict], clients: int) -> list[tuple[int, dict, str]]:
    """POST each body to /v1/systemone, traced, from `clients` sessions at once (client k sends bodies k, k +
    clients, ...); (index, answer, job id) of each, every one asserted 200."""
    from concurrent.futures import ThreadPoolExecutor

    from laya_common import contract

    def client(k: int) -> list[tuple[int, dict, str]]:
        with requests.Session() as http:
            http.headers.update({"Authorization": f"Bearer {API_KEY}", contract.TRACE_HEADER: "1"})
            out = []
            for i in range(k, len(bodies), clients):
                r = http.post(service.url("/v1/systemone"), json=bodies[i], timeout=120)
                assert r.status_code == 200, r.text
                out.append((i, r.json(), r.headers["x-job-id"]))
            return out

    with ThreadPoolExecutor(clients) as pool:
        answers = [a for chunk in pool.map(client, range(clients)) for a in chunk]
    assert len(answers) == len(bodies)
    return answers


def request_body(state: object, **questions: dict) -> dict:
    return {"model": "english", "state": state, "questions": questions}


NOUL = {"type": "noul", "instructions": "Does the customer ask for a refund?"}
CHOICE = {"type": "choice", "instructions": "What is the topic?", "criteria": ["billing", "delivery", "login"]}
SCORE = {"type": "score", "instructions": "How angry is the customer?", "criteria": ["calm", "annoyed", "furious"]}


def laya_run(checkpoint: Path, payloads: list[dict], model: str = "english") -> list[dict]:
    """What `laya-run` prints for each payload (one JSON line each)."""
    lines = "".join(json.dumps(p) + "\n" for p in payloads)
    out = subprocess.run(
        [str(BIN / "laya-run"), str(checkpoint), "--executor", "reference", "--device", "cpu", "--model", model],
        input=lines,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    answers = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(answers) == len(payloads), out.stdout
    return answers


# Rows packed with other states' rows into one forward pass (batches) reduce in another order than a lone
# request's rows, so a probability can land on the other side of a 4th-decimal rounding step.
PACKED_ATOL = 2e-4


def assert_same_answers(got: object, want: object, atol: float = PACKED_ATOL, path: str = "") -> None:
    """Equal keys in equal order, equal strings, numbers within `atol`."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and list(got) == list(want), f"{path}: keys {list(got)} != {list(want)}"
        for key in want:
            assert_same_answers(got[key], want[key], atol, f"{path}.{key}")
    elif isinstance(want, float) or isinstance(got, float):
        assert abs(got - want) <= atol, f"{path}: {got} != {want} (atol {atol})"
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"
