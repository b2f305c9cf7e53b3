"""`laya-run CHECKPOINT [BUNDLE]`: one JSON request per stdin line, one JSON response per stdout line.

A line that cannot be answered gets an error object with the status the HTTP API would use
(`{"status": 422, "error": "validation", "detail": ..., "field": ...}`) and the next line is read.
An executor failure prints a 500 error object and ends the process with status 1, as the worker stops.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import BinaryIO, TextIO

from laya_common.contract import (
    PROTOCOLS,
    ExecutorError,
    RequestError,
    canonical_model,
    error_body,
    parse_protocol,
    read_json,
    wire_json,
)
from laya_common.version import add_version_flag


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="laya-run", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("checkpoint", type=Path, help="checkpoint directory (the five artifacts)")
    p.add_argument("bundle", type=Path, nargs="?", help="CUDA bundle directory (for --executor cuda)")
    p.add_argument(
        "--executor",
        choices=("reference", "cuda", "auto"),
        default="auto",
        help="reference: plain torch fp32; cuda: the bundle's kernels on a Hopper GPU; auto (default): "
        "cuda when a Hopper GPU and a BUNDLE that verifies are here, else reference",
    )
    p.add_argument("--device", help="torch device for the reference executor (default: cuda if present, else cpu)")
    p.add_argument(
        "--model",
        default="english",
        type=_model,
        help="the Laya model the checkpoint is; a request naming another Laya model gets 422, one naming "
        "this model, an alias of it, no model or a non-Laya id is answered (default: english)",
    )
    p.add_argument(
        "--protocol",
        default=PROTOCOLS[0],
        type=_protocol,
        help=f"the laya release whose /v1/systemone each line speaks: {' or '.join(PROTOCOLS)} (0.3 or 0.4 is "
        f"enough; default {PROTOCOLS[0]}); under 0.4.15 a line may hold 0.4's controls and is answered in its shape",
    )
    p.add_argument("--eager", action="store_true", help="cuda executor: launch kernels without CUDA graphs")
    p.add_argument(
        "--original-rope",
        action="store_true",
        help="cuda executor: RoPE rounded like the reference's bf16 path instead of fused fp32 math",
    )
    p.add_argument(
        "--torch-readout",
        action="store_true",
        help="cuda executor: the scorer and act head in torch ops instead of the bundle's two readout kernels",
    )
    add_version_flag(p)
    args = p.parse_args(argv)
    if args.executor == "reference" and (args.eager or args.original_rope or args.torch_readout):
        print(
            "laya-run: --eager, --original-rope and --torch-readout only change the cuda executor; ignored",
            file=sys.stderr,
        )

    from worker.engine.engine import Engine
    from worker.engine.executors import ExecutorOptions

    options = ExecutorOptions(
        device=args.device,
        bundle=args.bundle,
        eager=args.eager,
        original_rope=args.original_rope,
        torch_readout=args.torch_readout,
    )
    try:
        engine = Engine(args.checkpoint, executor=args.executor, model_name=args.model, options=options)
    except (FileNotFoundError, ValueError) as e:
        print(f"laya-run: {e}", file=sys.stderr)
        return 2
    print(f"laya-run: {engine.startup_line()}", file=sys.stderr)
    return serve_lines(engine, sys.stdin.buffer, sys.stdout, args.protocol)


def _model(name: str) -> str:
    try:
        return canonical_model(name, "--model")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _protocol(value: str) -> str:
    try:
        return parse_protocol(value, "--protocol")
    except RequestError as e:
        raise argparse.ArgumentTypeError(e.detail) from None


def serve_lines(engine, lines: BinaryIO, out: TextIO, protocol: str = PROTOCOLS[0]) -> int:
    """Answer each non-blank line of `lines` (UTF-8 bytes) in `protocol` with one line on `out`."""
    for raw in lines:
        if not raw.strip():
            continue
        try:
            payload = parse_line(raw)
            result = engine.decide(payload, protocol)
        except RequestError as e:
            result = e.to_dict()
        except ExecutorError as e:
            print(wire_json(error_body("executor_failure", str(e))), file=out, flush=True)
            return 1
        print(wire_json(result), file=out, flush=True)
    return 0


def parse_line(raw: bytes) -> object:
    """One request line as JSON; RequestError (400) for bytes that are not strict UTF-8 JSON (contract.read_json)."""
    try:
        return read_json(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise RequestError(f"line is not UTF-8: {e.reason} at byte {e.start}", kind="bad_request") from None
    except ValueError as e:  # JSONDecodeError, NaN, nesting, and integers longer than Python reads
        raise RequestError(f"line is not JSON: {e}", kind="bad_request") from None


if __name__ == "__main__":
    sys.exit(main())
