"""recipe/compare_with_backend.py against the live service: no answer may differ from laya-run's."""

from __future__ import annotations

import json

from laya_common.version import git_commit, package_version
from recipe.compare_with_backend import DEFAULT_REQUESTS, main
from service.helpers import API_KEY


def test_the_recipe_finds_no_difference_and_stores_both_sides(stack, checkpoint, tmp_path):
    out = tmp_path / "compare"
    assert main(frontend=stack.base_url, checkpoint=checkpoint, output=out, executor="reference", api_key=API_KEY) == 0
    report = json.loads((out / "compare.json").read_text())
    assert report["differences"] == [] and report["requests"] == len(DEFAULT_REQUESTS)
    versions = report["versions"]
    assert (versions["laya-service"], versions["commit"]) == (package_version(), git_commit())
    http = (out / "http.jsonl").read_text().splitlines()
    assert http == (out / "cli.jsonl").read_text().splitlines()
    assert len(http) == len(DEFAULT_REQUESTS) and any('"status": 422' in line for line in http)


def test_the_recipe_reports_a_difference(stack, tmp_path):
    """Another checkpoint's laya-run disagrees with the service: the recipe must say so and exit 1."""
    from worker.commands.synthesize import synthesize

    other = synthesize(tmp_path / "other", size="tiny", seed=7)
    out = tmp_path / "compare"
    assert main(frontend=stack.base_url, checkpoint=other, output=out, executor="reference", api_key=API_KEY) == 1
    assert json.loads((out / "compare.json").read_text())["differences"]
