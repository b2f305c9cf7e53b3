#!/usr/bin/env bash
# An A/B of the synchronous path in one call on one machine: recipe.http_overhead on a fresh recipe.stack with
# the cuda executor (LAYA_EXECUTOR overrides it), alternately with an older tree of the service first on
# PYTHONPATH (base) and with this checkout (new), ROUNDS times (default 2). BASE holds the older app/, worker/
# and laya_common/:
#   git archive COMMIT app worker laya_common | tar -x -C BASE
# On the GPU machine, after `source .gpu-site/env.sh` (recipe/gpu_steps.sh does it) and with PYTHONPATH holding
# this checkout:
#   recipe/overhead_ab.sh BASE CHECKPOINT BUNDLE OUT [ROUNDS]
# Writes OUT/<variant>-<round>/ (result/samples.json, the stack's logs) and OUT/ab.json: each run's summaries
# and Celery floor in the order run, per-sample lists left out.
set -uo pipefail
[ "${1:-}" = "--help" ] && { sed -n 2,11p "$0"; exit 0; }
source "$(dirname "$0")/ab_stacks.sh"
alternate "${1:?usage: recipe/overhead_ab.sh BASE CHECKPOINT BUNDLE OUT [ROUNDS]}" "${2:?checkpoint}" "${3:?bundle}" \
  "${4:?output directory}" "${5:-2}" python3 -m recipe.http_overhead --samples 500 --per-client 30 \
  --floor-pools prefork --floor-samples 200 --output
python3 - "$4" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
runs = {}
for samples in sorted(out.glob("*/result/samples.json"), key=lambda p: p.stat().st_mtime):
    report = json.loads(samples.read_text())
    runs[samples.parent.parent.name] = {"summary": report["summary"], "celery_floor": report["celery_floor"]}
(out / "ab.json").write_text(json.dumps({"runs": runs}, indent=1) + "\n")
print(f"overhead_ab: {len(runs)} runs in {out / 'ab.json'}")
PY
