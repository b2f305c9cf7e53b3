"""`laya-stack`: the whole service on one machine: Redis (started here when LAYA_REDIS_URL does not answer),
one worker and the API. Without LAYA_CHECKPOINT it synthesizes a tiny random-weight checkpoint once into
~/.cache/laya/tiny-seed0 and reuses it. The worker is restarted if it stops (as after an executor
failure); Ctrl-C stops everything.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

from worker import contract

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "laya"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
STOP_TIMEOUT_S = 20


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="laya-stack", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Every laya-api and laya-worker setting (see their --help) applies.")
    p.add_argument("--redis-dir", type=Path, default=CACHE / "redis",
                   help="data directory of a Redis started here (append-only file on; default: %(default)s)")
    args = p.parse_args(argv)
    env = dict(os.environ)
    env.setdefault("LAYA_REDIS_URL", contract.DEFAULT_REDIS_URL)
    processes: list[tuple[str, subprocess.Popen]] = []
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        if not redis_answers(env["LAYA_REDIS_URL"]):
            processes.append(("redis", start_redis(env["LAYA_REDIS_URL"], args.redis_dir)))
        env.setdefault("LAYA_CHECKPOINT", str(tiny_checkpoint()))
        worker = start("worker", ["laya-worker"], env)
        processes.append(("worker", worker))
        processes.append(("api", start("api", ["laya-api"], env)))
        url = f"http://{env.get('LAYA_HOST', '127.0.0.1')}:{env.get('LAYA_PORT', '8080')}"
        announced = False
        while not stopping:
            for name, proc in processes:
                if proc.poll() is None:
                    continue
                if name != "worker":
                    print(f"laya-stack: {name} exited with status {proc.returncode}; stopping", file=sys.stderr)
                    return 1
                print(f"laya-stack: worker exited with status {proc.returncode}; starting a fresh one",
                      file=sys.stderr)
                processes[processes.index((name, proc))] = ("worker", start("worker", ["laya-worker"], env))
            if not announced and healthy(url):
                print(f"laya-stack: ready at {url} (Ctrl-C stops everything)", file=sys.stderr)
                announced = True
            time.sleep(0.5)
        return 0
    finally:
        for name, proc in reversed(processes):
            terminate(name, proc)


def redis_answers(url: str) -> bool:
    from redis import Redis
    from redis.exceptions import RedisError

    try:
        return bool(Redis.from_url(url, socket_connect_timeout=1).ping())
    except RedisError:
        return False


def start_redis(url: str, data_dir: Path) -> subprocess.Popen:
    """A local redis-server for `url` (its port and password), append-only file on, waited for."""
    parsed = urlparse(url)
    if parsed.scheme != "redis" or parsed.hostname not in LOCAL_HOSTS:
        raise SystemExit(f"laya-stack: Redis at {parsed.hostname}:{parsed.port} does not answer, and only a "
                         "local redis:// URL can be started here")
    server = shutil.which("redis-server")
    if server is None:
        raise SystemExit("laya-stack: no redis-server on PATH (scripts/setup.sh installs it)")
    data_dir.mkdir(parents=True, exist_ok=True)
    cmd = [server, "--bind", "127.0.0.1", "--port", str(parsed.port or 6379), "--dir", str(data_dir),
           "--appendonly", "yes", "--save", ""]
    if parsed.password:
        cmd += ["--requirepass", parsed.password]
    proc = start("redis", cmd, dict(os.environ))
    deadline = time.monotonic() + 10
    while not redis_answers(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("laya-stack: redis-server did not start (see its output above)")
        time.sleep(0.1)
    return proc


def tiny_checkpoint() -> Path:
    """The cached tiny synthesized checkpoint, written once (atomically) and reused."""
    from worker.checkpoint import ARTIFACTS

    path = CACHE / "tiny-seed0"
    if all((path / name).is_file() for name in ARTIFACTS):
        return path
    from worker.synthesize import synthesize

    print(f"laya-stack: LAYA_CHECKPOINT is not set; synthesizing a tiny checkpoint into {path}", file=sys.stderr)
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="tiny-", dir=CACHE))
    synthesize(tmp, size="tiny", seed=0)
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
    return path


def start(name: str, cmd: list[str], env: dict) -> subprocess.Popen:
    if shutil.which(cmd[0]) is None and not Path(cmd[0]).exists():
        cmd = [str(Path(sys.executable).parent / cmd[0]), *cmd[1:]]  # a venv's script, not on PATH
    print(f"laya-stack: starting {name}: {' '.join(cmd)}", file=sys.stderr)
    return subprocess.Popen(cmd, env=env, start_new_session=True)  # Ctrl-C reaches us only; we stop them in order


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def terminate(name: str, proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"laya-stack: {name} did not stop in {STOP_TIMEOUT_S} s; killing it", file=sys.stderr)
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
