"""`laya-run CHECKPOINT [BUNDLE]`: one JSON request per stdin line, one JSON response per stdout line.

A line that cannot be answered gets an error object with the status the HTTP API would use
(`{"status": 422, "error": "validation", "detail": ..., "field": ...}`) and the next line is read.
An executor failure prints a 500 error object and ends the process with status 1, as the worker stops.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

from worker.contract import ExecutorError, RequestError, error_body


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="laya-run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", type=Path, help="checkpoint directory (the five artifacts)")
    p.add_argument("bundle", type=Path, nargs="?", help="CUDA bundle directory (for --executor cuda)")
    p.add_argument("--executor", choices=("reference", "cuda", "auto"), default="auto",
                   help="reference: plain torch fp32; cuda: the bundle's kernels; auto: the fastest available")
    p.add_argument("--device", help="torch device for the reference executor (default: cuda if present, else cpu)")
    p.add_argument("--model", default="english", help="the model name requests must name (default: english)")
    p.add_argument("--eager", action="store_true", help="cuda executor: launch kernels without CUDA graphs")
    p.add_argument("--original-rope", action="store_true",
                   help="cuda executor: RoPE rounded like the reference's bf16 path instead of fused fp32 math")
    args = p.parse_args(argv)
    if args.executor != "cuda" and (args.eager or args.original_rope):
        print("laya-run: --eager and --original-rope only change the cuda executor; ignored", file=sys.stderr)

    from worker.engine import Engine

    try:
        engine = Engine(args.checkpoint, executor=args.executor, bundle=args.bundle, device=args.device,
                        model_name=args.model)
    except (FileNotFoundError, ValueError) as e:
        print(f"laya-run: {e}", file=sys.stderr)
        return 2
    return serve_lines(engine, sys.stdin, sys.stdout)


def serve_lines(engine, lines: TextIO, out: TextIO) -> int:
    for line in lines:
        if not line.strip():
            continue
        try:
            result = engine.decide(json.loads(line))
        except json.JSONDecodeError as e:
            result = error_body("bad_request", f"line is not JSON: {e}")
        except RequestError as e:
            result = e.to_dict()
        except ExecutorError as e:
            print(json.dumps(error_body("executor_failure", str(e))), file=out, flush=True)
            return 1
        print(json.dumps(result, ensure_ascii=False), file=out, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
