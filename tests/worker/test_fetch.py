import os
import subprocess
import sys


def test_fetch_fails_fast_with_one_line_when_the_hub_cannot_be_reached(tmp_path):
    env = dict(os.environ, HF_ENDPOINT="http://127.0.0.1:9")  # the discard port: nothing listens
    run = subprocess.run(
        [sys.executable, "-m", "worker.commands.bundle_cli", "fetch", str(tmp_path / "ck")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    # "at HOST:PORT": the connection check refused it, before the hub client's minute of retries
    assert len(lines) == 1 and lines[0].startswith("laya-bundle fetch: cannot reach the model hub at 127.0.0.1:9 ")
    assert not (tmp_path / "ck").exists()
