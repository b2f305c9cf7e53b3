"""`laya-stack`: the whole service on one machine: Redis (started here when LAYA_REDIS_URL does not answer),
one worker per model and the API. A model without a checkpoint gets a tiny random-weight one of its layout,
synthesized once into ~/.cache/laya/ and reused (english: tiny-seed0). A worker, the API or the Redis started
here that stops is started again, after 0.5 s doubling to 30 s while it keeps stopping; one that exits with
status 2 (a bad setting) stops everything. Ctrl-C stops everything.

The Redis started here takes the password of LAYA_REDIS_URL, keeps an append-only file and is bounded by
--redis-maxmemory with maxmemory-policy noeviction: a write past the bound is refused, never a queued job
evicted. Its configuration goes in on stdin, so the password is on no command line and in no log.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from urllib.parse import unquote, urlparse

from laya_common import contract, settings
from laya_common.settings import Setting, SettingsError, or_exit
from laya_common.version import add_version_flag
from worker.service.settings import WorkerSettings

# where the API listens: laya-api's own two settings (app/config.py), read here to know when it answers; a bad
# value stops the stack before anything starts
API_ADDRESS = {
    "HOST": Setting("LAYA_HOST", "127.0.0.1", "address the API binds"),
    "PORT": Setting("LAYA_PORT", 8080, "port the API binds"),
}
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "laya"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
STOP_TIMEOUT_S = 20
REDIS_START_TIMEOUT_S = 10
BAD_SETTING = 2  # the exit status of a bad setting, which a restart would only repeat
# a process that keeps stopping is started again after FIRST, then twice as long each time up to MAX; once one
# has stayed up STEADY, its next restart waits FIRST again
BACKOFF_FIRST_S, BACKOFF_MAX_S, BACKOFF_STEADY_S = 0.5, 30.0, 60.0
DEFAULT_REDIS_MAXMEMORY = "1gb"
# what redis-server takes for a size: bytes, or k/kb/m/mb/g/gb (k = 1000, kb = 1024), any case
REDIS_SIZE = re.compile(r"([0-9]+)(b|k|kb|m|mb|g|gb)?", re.IGNORECASE)
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
    p.add_argument(
        "--redis-maxmemory",
        type=redis_size,
        metavar="SIZE",
        help="maxmemory of a Redis started here, such as 512mb or 2gb; past it a write is refused, nothing "
        f"is evicted (default: LAYA_REDIS_MAXMEMORY, else {DEFAULT_REDIS_MAXMEMORY})",
    )
    add_version_flag(p)
    args = p.parse_args(argv)
    try:
        models = contract.parse_models(args.models, "--models")
        checkpoints = model_checkpoints(args.checkpoint, models)
    except ValueError as e:
        p.error(str(e))
    env = dict(os.environ)
    # a bad setting stops the stack before anything starts, with one line naming it
    or_exit("laya-stack", lambda: WorkerSettings.from_env(env))
    api = or_exit("laya-stack", lambda: settings.read(API_ADDRESS, env))
    maxmemory = args.redis_maxmemory or or_exit("laya-stack", lambda: env_redis_maxmemory(env))
    env.setdefault("LAYA_REDIS_URL", contract.DEFAULT_REDIS_URL)
    env["LAYA_MODELS"] = ",".join(models)
    children: list[Child] = []
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        if not redis_answers(env["LAYA_REDIS_URL"]):
            children.append(start_local_redis(env["LAYA_REDIS_URL"], args.redis_dir, maxmemory))
        for model in models:
            checkpoint = checkpoints.get(model) or synthesized_checkpoint(SYNTHESIZED_SIZE[model])
            name = f"worker {model}"
            worker_env = {**env, "LAYA_MODEL": model, "LAYA_CHECKPOINT": str(checkpoint)}
            children.append(Child.started(name, partial(start, name, ["laya-worker"], worker_env)))
        children.append(Child.started("api", partial(start, "api", ["laya-api"], env)))
        return supervise(children, api_url(api["HOST"], api["PORT"]), models, lambda: stopping)
    finally:
        for child in reversed(children):
            terminate(child.name, child.proc)


@dataclass
class Child:
    """A process the stack started, started again by `tend` when it stops, later each time it stops soon."""

    name: str
    launch: Callable[[], subprocess.Popen]
    proc: subprocess.Popen
    started_at: float
    delay_s: float = BACKOFF_FIRST_S
    restart_at: float | None = None  # set while it is down: when the fresh one starts

    @classmethod
    def started(cls, name: str, launch: Callable[[], subprocess.Popen]) -> Child:
        return cls(name, launch, launch(), time.monotonic())

    def tend(self) -> None:
        """Notice that it stopped (and schedule a fresh one), or start the fresh one once it is due."""
        now = time.monotonic()
        if self.restart_at is None and self.proc.poll() is not None:
            self.schedule_restart(now)
        elif self.restart_at is not None and now >= self.restart_at:
            self.proc, self.started_at, self.restart_at = self.launch(), now, None

    def schedule_restart(self, now: float) -> None:
        kill_leftovers(self.proc)
        if now - self.started_at >= BACKOFF_STEADY_S:
            self.delay_s = BACKOFF_FIRST_S
        print(
            f"laya-stack: {self.name} exited with status {self.proc.returncode}; "
            f"starting a fresh one in {self.delay_s:g} s",
            file=sys.stderr,
        )
        self.restart_at = now + self.delay_s
        self.delay_s = min(self.delay_s * 2, BACKOFF_MAX_S)


def supervise(children: list[Child], url: str, models: tuple[str, ...], stopping: Callable[[], bool]) -> int:
    """Keep `children` running until `stopping()` (0) or one exits with a bad setting (2); say when ready."""
    announced = False
    while not stopping():
        for child in children:
            if child.proc.poll() == BAD_SETTING:
                print(f"laya-stack: {child.name} exited with status {BAD_SETTING}; stopping", file=sys.stderr)
                return BAD_SETTING
            child.tend()
        if not announced and healthy(url):
            print(f"laya-stack: ready at {url}, serving {', '.join(models)} (Ctrl-C stops everything)", file=sys.stderr)
            announced = True
        time.sleep(0.5)
    return 0


def api_url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"  # an IPv6 address in brackets


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


def redis_size(value: str) -> str:
    """`value` if redis-server takes it as a maxmemory other than 0 (0 would be no bound at all)."""
    match = REDIS_SIZE.fullmatch(value.strip())
    if match is None or int(match[1]) == 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a size above 0 such as 512mb or 2gb")
    return value.strip()


def env_redis_maxmemory(env: dict) -> str:
    raw = env.get("LAYA_REDIS_MAXMEMORY") or DEFAULT_REDIS_MAXMEMORY
    try:
        return redis_size(raw)
    except argparse.ArgumentTypeError as e:
        raise SettingsError(f"LAYA_REDIS_MAXMEMORY={e}") from None


def redis_answers(url: str) -> bool:
    from redis import Redis
    from redis.exceptions import RedisError

    try:
        return bool(Redis.from_url(url, socket_connect_timeout=1).ping())
    except RedisError:
        return False


def masked(url: str) -> str:
    """`url` with its password, if any, as ***: what a log line may show."""
    parsed = urlparse(url)
    if parsed.password is None:
        return url
    host = parsed.netloc.rpartition("@")[2]
    return parsed._replace(netloc=f"{parsed.username or ''}:***@{host}").geturl()


def start_local_redis(url: str, data_dir: Path, maxmemory: str) -> Child:
    """A redis-server for `url` (a local redis:// one), supervised, waited for until it answers."""
    parsed = urlparse(url)
    if parsed.scheme != "redis" or parsed.hostname not in LOCAL_HOSTS:
        raise SystemExit(
            f"laya-stack: Redis at {masked(url)} does not answer, and only a local redis:// URL can be started here"
        )
    print(f"laya-stack: no Redis answers at {masked(url)}; starting one", file=sys.stderr)
    data_dir.mkdir(parents=True, exist_ok=True)
    config = redis_config(parsed.port or 6379, data_dir, maxmemory, unquote(parsed.password or ""))
    child = Child.started("redis", partial(start_redis, config))
    with contextlib.suppress(TimeoutError):  # said below, with what a dead one says
        wait_until(lambda: child.proc.poll() is not None or redis_answers(url), REDIS_START_TIMEOUT_S, "redis-server")
    if child.proc.poll() is not None or not redis_answers(url):
        terminate(child.name, child.proc)
        raise SystemExit("laya-stack: redis-server did not start (see its output above)")
    return child


def wait_until(predicate: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.1):
    """`predicate()`'s first truthy value, polled every `interval_s`; TimeoutError naming `what` after `timeout_s`.
    (The recipes and the tests wait with it too.)"""
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(interval_s)
    return value


def redis_config(port: int, data_dir: Path, maxmemory: str, password: str) -> str:
    """redis.conf text: loopback, append-only file on, bounded without eviction, the password if any."""
    lines = [
        "bind 127.0.0.1",
        f"port {port}",
        f"dir {redis_quoted(str(data_dir))}",
        "appendonly yes",
        'save ""',
        f"maxmemory {maxmemory}",
        "maxmemory-policy noeviction",  # queued work is never evicted: a write past maxmemory fails instead
    ]
    if password:
        lines.append(f"requirepass {redis_quoted(password)}")
    return "\n".join(lines) + "\n"


def redis_quoted(value: str) -> str:
    """`value` as one redis.conf argument: in double quotes, every byte but plain printable ASCII as \\xHH."""
    safe = set(range(0x20, 0x7F)) - set(b'"\\')
    return '"' + "".join(chr(b) if b in safe else f"\\x{b:02x}" for b in value.encode()) + '"'


def start_redis(config: str) -> subprocess.Popen:
    """redis-server reading `config` on stdin (`-`): the password stays off its command line."""
    server = shutil.which("redis-server")
    if server is None:
        raise SystemExit("laya-stack: no redis-server on PATH (scripts/setup.sh installs it)")
    # it reads no LAYA_* variable, and LAYA_REDIS_URL holds the password
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAYA_")}
    proc = start("redis", [server, "-"], env, stdin=subprocess.PIPE)
    # a few hundred bytes: the pipe takes them at once; redis-server reads to the end, then serves. A broken pipe
    # means it exited already, which whoever started it notices
    with contextlib.suppress(BrokenPipeError), proc.stdin:
        proc.stdin.write(config.encode())
    return proc


def synthesized_checkpoint(size: str) -> Path:
    """The cached synthesized checkpoint of `size` (seed 0), written once (atomically) and reused."""
    from laya_common.checkpoint import ARTIFACTS

    path = CACHE / f"{size}-seed0"
    if all((path / name).is_file() for name in ARTIFACTS):
        return path
    from worker.commands.synthesize import synthesize

    print(f"laya-stack: no checkpoint given; synthesizing a {size} one into {path}", file=sys.stderr)
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{size}-", dir=CACHE))
    synthesize(tmp, size=size, seed=0)
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
    return path


def start(name: str, cmd: list[str], env: dict, stdin: int | None = None) -> subprocess.Popen:
    """`cmd` in a session of its own (Ctrl-C reaches the stack only, which stops them in order); the log line
    names its pid. A command line holds no secret: everything secret goes through the environment or stdin."""
    if shutil.which(cmd[0]) is None and not Path(cmd[0]).exists():
        cmd = [str(Path(sys.executable).parent / cmd[0]), *cmd[1:]]  # a venv's script, not on PATH
    proc = subprocess.Popen(cmd, env=env, stdin=stdin, start_new_session=True)
    print(f"laya-stack: started {name}, pid {proc.pid}: {' '.join(cmd)}", file=sys.stderr)
    return proc


def kill_leftovers(proc: subprocess.Popen) -> None:
    """Kill what is left of a stopped child's process group: the gunicorn workers of a killed API master would
    hold its port (and serve on, unsupervised) while a fresh one tries to bind it."""
    with contextlib.suppress(ProcessLookupError):  # nothing was left
        os.killpg(proc.pid, signal.SIGKILL)


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
