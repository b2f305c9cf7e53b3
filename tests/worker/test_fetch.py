import os
import subprocess
import sys
import time


def test_fetch_fails_fast_with_one_line_when_the_hub_cannot_be_reached(tmp_path):
    env = dict(os.environ, HF_ENDPOINT="http://127.0.0.1:9")  # the discard port: nothing listens
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "bundle.cli", "fetch", str(tmp_path / "ck")],
                         capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 1
    assert time.monotonic() - start < 30
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("laya-bundle fetch: cannot reach the model hub")
    assert not (tmp_path / "ck").exists()
