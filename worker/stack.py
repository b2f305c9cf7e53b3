"""`laya-stack`: the whole service on one machine: Redis (started here when LAYA_REDIS_URL does not answer),
one worker per model and the API. A model without a checkpoint gets a tiny random-weight one of its layout,
synthesized once into ~/.cache/laya/ and reused (english: tiny-seed0). A worker is restarted if it stops (as
after an executor failure); Ctrl-C stops everything.
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

from laya_common.settings import or_exit
from worker import contract
from worker.settings import WorkerSettings
from worker.version import add_version_flag

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "laya"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
STOP_TIMEOUT_S = 20
# the synthesized stand-in for each model: typed-decisions' has other dimensions and a 1024-token budget
SYNTHESIZED_SIZE = {"english": "tiny", "multilingual": "tiny-alt", "typed-decisions": "tiny-typed"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="laya-stack",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Every laya-api and laya-worker setting (see their --help) applies.",
    )
    p.add_argument(
        "--models",
        default=os.environ.get("LAYA_MODELS") or contract.MODELS[0],
        help="comma-separated Laya models to serve, the default first; one worker each "
        "(default: LAYA_MODELS, else %(default)s)",
    )
    p.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        metavar="MODEL=DIR",
        help="a model's checkpoint directory (repeat per model; the default model's is LAYA_CHECKPOINT if set)",
    )
    p.add_argument(
        "--redis-dir",
        type=Path,
        default=CACHE / "redis",
        help="data directory of a Redis started here (append-only file on; default: %(default)s)",
    )
    add_version_flag(p)
    args = p.parse_args(argv)
    try:
        models = contract.parse_models(args.models, "--models")
        checkpoints = model_checkpoints(args.checkpoint, models)
    except ValueError as e:
        p.error(str(e))
    env = dict(os.environ)
    or_exit("laya-stack", lambda: WorkerSettings.from_env(env))  # before anything starts; the API checks its own
    env.setdefault("LAYA_REDIS_URL", contract.DEFAULT_REDIS_URL)
    env["LAYA_MODELS"] = ",".join(models)
    processes: list[tuple[str, subprocess.Popen]] = []
    worker_envs: dict[str, dict] = {}
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        if not redis_answers(env["LAYA_REDIS_URL"]):
            processes.append(("redis", start_redis(env["LAYA_REDIS_URL"], args.redis_dir)))
        for model in models:
            checkpoint = checkpoints.get(model) or synthesized_checkpoint(SYNTHESIZED_SIZE[model])
            name = f"worker {model}"
            worker_envs[name] = {**env, "LAYA_MODEL": model, "LAYA_CHECKPOINT": str(checkpoint)}
            processes.append((name, start(name, ["laya-worker"], worker_envs[name])))
        processes.append(("api", start("api", ["laya-api"], env)))
        url = f"http://{env.get('LAYA_HOST', '127.0.0.1')}:{env.get('LAYA_PORT', '8080')}"
        announced = False
        while not stopping:
            for i, (name, proc) in enumerate(processes):
                if proc.poll() is None:
                    continue
                if name not in worker_envs or proc.returncode == 2:  # 2: a bad setting, which a restart repeats
                    print(f"laya-stack: {name} exited with status {proc.returncode}; stopping", file=sys.stderr)
                    return proc.returncode if proc.returncode == 2 else 1
                print(f"laya-stack: {name} exited with status {proc.returncode}; starting a fresh one", file=sys.stderr)
                processes[i] = (name, start(name, ["laya-worker"], worker_envs[name]))
            if not announced and healthy(url):
                print(
                    f"laya-stack: ready at {url}, serving {', '.join(models)} (Ctrl-C stops everything)",
                    file=sys.stderr,
                )
                announced = True
            time.sleep(0.5)
        return 0
    finally:
        for name, proc in reversed(processes):
            terminate(name, proc)


def model_checkpoints(pairs: list[str], models: tuple[str, ...]) -> dict[str, str]:
    """Model -> checkpoint from MODEL=DIR pairs, the default model's from LAYA_CHECKPOINT unless given.

    ValueError for a pair that is not MODEL=DIR or names a model not served.
    """
    checkpoints = {models[0]: os.environ["LAYA_CHECKPOINT"]} if os.environ.get("LAYA_CHECKPOINT") else {}
    for pair in pairs:
        name, _, directory = pair.partition("=")
        if not directory:
            raise ValueError(f"--checkpoint {pair!r}: use MODEL=DIR")
        model = contract.canonical_model(name, "--checkpoint")
        if model not in models:
            raise ValueError(f"--checkpoint {pair!r}: {model} is not among --models {','.join(models)}")
        checkpoints[model] = directory
    return checkpoints


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
        raise SystemExit(
            f"laya-stack: Redis at {parsed.hostname}:{parsed.port} does not answer, and only a "
            "local redis:// URL can be started here"
        )
    server = shutil.which("redis-server")
    if server is None:
        raise SystemExit("laya-stack: no redis-server on PATH (scripts/setup.sh installs it)")
    data_dir.mkdir(parents=True, exist_ok=True)
    cmd = [
        server,
        "--bind",
        "127.0.0.1",
        "--port",
        str(parsed.port or 6379),
        "--dir",
        str(data_dir),
        "--appendonly",
        "yes",
        "--save",
        "",
    ]
    if parsed.password:
        cmd += ["--requirepass", parsed.password]
    proc = start("redis", cmd, dict(os.environ))
    deadline = time.monotonic() + 10
    while not redis_answers(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("laya-stack: redis-server did not start (see its output above)")
        time.sleep(0.1)
    return proc


def synthesized_checkpoint(size: str) -> Path:
    """The cached synthesized checkpoint of `size` (seed 0), written once (atomically) and reused."""
    from laya_common.checkpoint import ARTIFACTS

    path = CACHE / f"{size}-seed0"
    if all((path / name).is_file() for name in ARTIFACTS):
        return path
    from worker.synthesize import synthesize

    print(f"laya-stack: no checkpoint given; synthesizing a {size} one into {path}", file=sys.stderr)
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{size}-", dir=CACHE))
    synthesize(tmp, size=size, seed=0)
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
