"""recipe/ab.sh: the base variant's processes, started as recipes start them (recipe.stack.checkout_env), import
the older tree of the service; the new variant's import this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
# what a recipe's worker imports: a process started with recipe.stack's environment, outside the checkout
REPORT_WORKER = """
import pathlib, subprocess, sys
from recipe.stack import checkout_env
found = subprocess.run([sys.executable, "-c", "import worker; print(worker.__file__)"], env=checkout_env(),
                       capture_output=True, text=True, cwd="/", check=True).stdout
pathlib.Path(sys.argv[1]).parent.mkdir(parents=True)
pathlib.Path(sys.argv[1]).write_text(found)
"""


def test_the_base_variant_runs_the_older_tree_and_the_new_one_this_checkout(tmp_path):
    base = tmp_path / "base"
    (base / "worker").mkdir(parents=True)
    (base / "worker" / "__init__.py").write_text("")
    out = tmp_path / "ab"
    env = {**os.environ, "PYTHONPATH": str(CHECKOUT), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    subprocess.run(
        ["recipe/ab.sh", "--own-stack", str(base), "unused", "unused", str(out), "1", "python", "-c", REPORT_WORKER],
        cwd=CHECKOUT,
        env=env,
        check=True,
    )
    assert Path((out / "base-1" / "result").read_text().strip()) == base / "worker" / "__init__.py"
    assert Path((out / "new-1" / "result").read_text().strip()) == CHECKOUT / "worker" / "__init__.py"
