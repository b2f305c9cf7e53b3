"""A checkpoint's weights as a state dict, and the English checkpoint fetched from the model hub.

Its files, their hashes and its configuration: `laya_common.checkpoint` and `laya_common.model`.
"""

from __future__ import annotations

from pathlib import Path

from laya_common.checkpoint import ARTIFACTS, WEIGHTS, check_checkpoint


def load_weights(checkpoint: Path | str, device: str = "cpu") -> dict:
    """Every tensor of `model.safetensors`, by its checkpoint name."""
    from safetensors.torch import load_file

    return load_file(str(Path(checkpoint) / WEIGHTS), device=device)


HUB_REPO = "convaiinnovations/laya"
HUB_REVISION = "55cf4c4ebb4ebe31b2550e8bdf3bd21b99753851"


class HubUnreachable(RuntimeError):
    """The model hub could not be reached (no network, DNS, proxy, or the hub is down)."""


def fetch(out: Path | str, *, repo: str = HUB_REPO, revision: str = HUB_REVISION) -> Path:
    """Download the five artifacts of `repo` at `revision` into `out`, with a progress bar per file."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    _check_hub_reachable(repo, revision)
    out = Path(out)
    for name in ARTIFACTS:
        try:
            hf_hub_download(repo, name, revision=revision, local_dir=str(out), etag_timeout=10)
        except LocalEntryNotFoundError as e:  # raised when the hub is offline and nothing is cached
            raise HubUnreachable(f"cannot reach the model hub for {repo}@{revision[:12]} ({e})") from None
        except (EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError) as e:
            raise FileNotFoundError(f"{repo}@{revision} has no {name}: {type(e).__name__}") from None
        except Exception as e:  # every transport failure surfaces as one of many classes
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise HubUnreachable(f"cannot reach the model hub for {repo}@{revision[:12]} ({reason})") from None
    return check_checkpoint(out)


def _check_hub_reachable(repo: str, revision: str, timeout_s: float = 5.0) -> None:
    """Fail in seconds, not after the client's minute of retries, when the hub's host cannot be reached."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname, port), timeout=timeout_s).close()
    except OSError as e:
        raise HubUnreachable(
            f"cannot reach the model hub at {url.hostname}:{port} for {repo}@{revision[:12]} ({e.strerror or e})"
        ) from None
