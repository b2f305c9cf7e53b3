"""A checkpoint directory: the five artifacts that make it, whether they are there, and their sha256."""

from __future__ import annotations

import hashlib
from pathlib import Path

AGENT_CONFIG = "rl_agent_config.json"
WEIGHTS = "model.safetensors"
ENCODER_CONFIG = "encoder/config.json"
TOKENIZER = "tokenizer/tokenizer.json"
TOKENIZER_CONFIG = "tokenizer/tokenizer_config.json"

# The five files that make a checkpoint, relative to its directory.
ARTIFACTS = (AGENT_CONFIG, WEIGHTS, ENCODER_CONFIG, TOKENIZER, TOKENIZER_CONFIG)


def check_checkpoint(checkpoint: Path | str) -> Path:
    """The checkpoint directory, or FileNotFoundError naming every artifact that is missing."""
    checkpoint = Path(checkpoint)
    missing = [name for name in ARTIFACTS if not (checkpoint / name).is_file()]
    if missing:
        raise FileNotFoundError(f"checkpoint {checkpoint} is missing {', '.join(missing)}")
    return checkpoint


def sha256_file(path: Path | str, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def artifact_hashes(checkpoint: Path | str) -> dict[str, str]:
    """sha256 of each of the five artifacts, keyed by its path relative to the checkpoint."""
    checkpoint = check_checkpoint(checkpoint)
    return {name: sha256_file(checkpoint / name) for name in ARTIFACTS}
