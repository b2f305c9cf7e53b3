"""The checkpoint's tokenizer, through `tokenizers` alone (no transformers at run time)."""

from __future__ import annotations

import json
from pathlib import Path

from laya_common.checkpoint import TOKENIZER, TOKENIZER_CONFIG


class UnencodableText(ValueError):
    """Text the tokenizer cannot take: it holds a lone surrogate, which no UTF-8 text can."""


class Tokenizer:
    """BPE tokenizer plus the special tokens a row is built from ([CLS], [SEP], [PAD], [MASK])."""

    def __init__(self, checkpoint: Path | str) -> None:
        from tokenizers import Tokenizer as BackendTokenizer

        checkpoint = Path(checkpoint)
        self._backend = BackendTokenizer.from_file(str(checkpoint / TOKENIZER))
        # the caller cuts sequences itself; a truncation or padding rule stored in tokenizer.json must not apply
        self._backend.no_truncation()
        self._backend.no_padding()
        config = json.loads((checkpoint / TOKENIZER_CONFIG).read_text())
        self.mask_token = _special(config, "mask_token", "[MASK]")
        self.cls_id = self._id(config, "cls_token", "[CLS]", checkpoint)
        self.sep_id = self._id(config, "sep_token", "[SEP]", checkpoint)
        self.pad_id = self._id(config, "pad_token", "[PAD]", checkpoint)
        self.mask_id = self._id(config, "mask_token", "[MASK]", checkpoint)

    def _id(self, config: dict, key: str, default: str, checkpoint: Path) -> int:
        token = _special(config, key, default)
        token_id = self._backend.token_to_id(token)
        if token_id is None:
            raise ValueError(f"{checkpoint / TOKENIZER} has no token {token!r} ({key} in {TOKENIZER_CONFIG})")
        return token_id

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, without special tokens; UnencodableText for a lone surrogate."""
        try:
            return self._backend.encode(text, add_special_tokens=False).ids
        except TypeError:
            raise UnencodableText("text holds a lone surrogate (\\ud800-\\udfff), which is not valid Unicode") from None

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, in one call; UnencodableText as `encode`.

        The batch path without character offsets (nothing here reads them): the same ids, a third less time."""
        try:
            return [encoding.ids for encoding in self._backend.encode_batch_fast(texts, add_special_tokens=False)]
        except TypeError:
            raise UnencodableText("text holds a lone surrogate (\\ud800-\\udfff), which is not valid Unicode") from None

    def scrub(self, text: str) -> str:
        """`text` with every literal mask token replaced by a space, so no text can forge an option marker."""
        return text.replace(self.mask_token, " ")


def _special(config: dict, key: str, default: str) -> str:
    value = config.get(key, default)
    return value["content"] if isinstance(value, dict) else value
