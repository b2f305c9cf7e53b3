"""`laya-bundle`: fetch or synthesize a checkpoint; build, export tables for, and verify a CUDA bundle.

It lives in `worker/` because it joins the two: fetching and synthesizing a checkpoint are the worker's,
while `bundle/` itself imports nothing from `worker/`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _fetch(args: argparse.Namespace) -> int:
    from worker.engine.checkpoint import HubUnreachable, fetch

    try:
        path = fetch(args.out, revision=args.revision)
    except (HubUnreachable, FileNotFoundError) as e:
        print(f"laya-bundle fetch: {e}", file=sys.stderr)
        return 1
    print(path)
    return 0


def _synthesize(args: argparse.Namespace) -> int:
    from worker.commands.synthesize import synthesize

    print(synthesize(args.out, size=args.size, seed=args.seed))
    return 0


def _build(args: argparse.Namespace) -> int:
    from bundle.build import main

    candidates = None
    if args.candidates is not None:
        try:
            candidates = json.loads(args.candidates.read_text())
        except (OSError, ValueError) as e:
            print(f"laya-bundle build: --candidates {args.candidates}: {e}", file=sys.stderr)
            return 2
    return main(out=args.out, tile_config=args.config, jobs=args.jobs, model=args.model, candidates=candidates)


def _export_tables(args: argparse.Namespace) -> int:
    from bundle.export_tables import main

    return main(checkpoint=args.checkpoint, out=args.out)


def _verify(args: argparse.Namespace) -> int:
    from bundle.verify import main

    return main(checkpoint=args.checkpoint, bundle=args.bundle)


def parser() -> argparse.ArgumentParser:
    from laya_common.presets import MODEL_PRESETS
    from laya_common.version import add_version_flag
    from worker.engine.checkpoint import HUB_REVISION

    p = argparse.ArgumentParser(prog="laya-bundle", description=__doc__)
    add_version_flag(p)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("fetch", help="download the English checkpoint's five artifacts from the model hub")
    s.add_argument("out", type=Path, help="directory to write the checkpoint into")
    s.add_argument("--revision", default=HUB_REVISION, help="hub revision (default: the pinned one)")
    s.set_defaults(func=_fetch)

    s = sub.add_parser("synthesize", help="write a checkpoint with the real layout and random weights")
    s.add_argument("out", type=Path, help="directory to write the checkpoint into")
    s.add_argument(
        "--size",
        choices=sorted(MODEL_PRESETS),
        default="tiny",
        help="dimensions: tiny (tests), tiny-alt (other depth/attention period), tiny-typed (other widths, "
        "1024-token budget), large (ModernBERT-large)",
    )
    s.add_argument("--seed", type=int, default=0, help="random seed; the same seed writes the same bytes")
    s.set_defaults(func=_synthesize)

    s = sub.add_parser("build", help="compile every TileLang kernel for sm_90a into one library + manifest.json")
    s.add_argument("out", type=Path, help="bundle directory to write")
    s.add_argument("--config", choices=("original", "optimized"), default="optimized", help="tile configuration")
    s.add_argument("--jobs", type=int, default=0, help="parallel compiles (default: CPU count)")
    s.add_argument(
        "--model",
        choices=sorted(MODEL_PRESETS),
        default="large",
        help="model dimensions to compile for (default: large, ModernBERT-large; tiny: tests)",
    )
    s.add_argument(
        "--candidates",
        type=Path,
        metavar="JSON",
        help="a tile sweep: build only the GEMM or attention entry points this file names ({entry: [tier, ...]}), "
        "with its tiers; recipe.kernel_bench and the kernel tests load such a bundle, the executor does not",
    )
    s.set_defaults(func=_build)

    s = sub.add_parser("export-tables", help="write the four RoPE tables, tables.json and the checkpoint hashes")
    s.add_argument("checkpoint", type=Path)
    s.add_argument("out", type=Path, help="bundle directory")
    s.set_defaults(func=_export_tables)

    s = sub.add_parser("verify", help="check library, manifest, tables and checkpoint against their hashes")
    s.add_argument("checkpoint", type=Path)
    s.add_argument("bundle", type=Path)
    s.set_defaults(func=_verify)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
