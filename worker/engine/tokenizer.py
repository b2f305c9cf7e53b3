"""The checkpoint's tokenizer, through `tokenizers` alone (no transformers at run time)."""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

from laya_common.checkpoint import TOKENIZER, TOKENIZER_CONFIG
from worker.engine.state_tokens import cut_safe, state_ids

LONE_SURROGATE = "text holds a lone surrogate (\\ud800-\\udfff), which is not valid Unicode"
CACHED_TEXTS = 8192  # recent texts `encode_cached` keeps; a 16-question request of 16 options each has 272


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
        self._cut_safe = cut_safe(self._backend)  # (prefixes, suffixes): may a long state be tokenized in part
        config = json.loads((checkpoint / TOKENIZER_CONFIG).read_text())
        self.mask_token = _special(config, "mask_token", "[MASK]")
        self.cls_id = self._id(config, "cls_token", "[CLS]", checkpoint)
        self.sep_id = self._id(config, "sep_token", "[SEP]", checkpoint)
        self.pad_id = self._id(config, "pad_token", "[PAD]", checkpoint)
        self.mask_id = self._id(config, "mask_token", "[MASK]", checkpoint)
        self._cache: OrderedDict[str, list[int]] = OrderedDict()

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
            raise UnencodableText(LONE_SURROGATE) from None

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, in one call; UnencodableText as `encode`.

        The batch path without character offsets (nothing here reads them): the same ids, a third less time."""
        try:
            return [encoding.ids for encoding in self._backend.encode_batch_fast(texts, add_special_tokens=False)]
        except TypeError:
            raise UnencodableText(LONE_SURROGATE) from None

    def encode_state(self, text: str, need: int, *, from_end: bool) -> list[int]:
        """Ids of `text` whose first `need` (from_end: last `need`) are the whole text's, tokenizing only as much
        of a long text as that takes where this tokenizer allows (`worker.engine.state_tokens`); UnencodableText as
        `encode`. The list may be shorter than the whole text's: a row keeps at most `need` of it. A long text is
        tokenized in pieces on the tokenizer's threads where that is exact."""
        try:
            return state_ids(
                self._backend, text, need, from_end=from_end, safe=self._cut_safe[from_end], split=self._cut_safe[1]
            )
        except TypeError:
            raise UnencodableText(LONE_SURROGATE) from None

    def encode_cached(self, texts: list[str]) -> list[list[int]]:
        """`encode_many`, answering texts seen recently from an LRU cache: question and option texts recur
        across requests (a caller asks the same questions of many states), and each costs a tokenizer call
        about 13 us however short it is. The lists are the cache's own: callers slice them, never modify them."""
        cache = self._cache
        found = [cache.get(text) for text in texts]
        missing = list(dict.fromkeys(text for text, ids in zip(texts, found, strict=True) if ids is None))
        fresh = dict(zip(missing, self.encode_many(missing), strict=True)) if missing else {}
        for text, ids in zip(texts, found, strict=True):
            if ids is not None:
                cache.move_to_end(text)
        cache.update(fresh)
        while len(cache) > CACHED_TEXTS:
            cache.popitem(last=False)
        return [ids if ids is not None else fresh[text] for text, ids in zip(texts, found, strict=True)]

    def scrub(self, text: str) -> str:
        """`text` with every literal mask token replaced by a space, so no text can forge an option marker."""
        return text.replace(self.mask_token, " ")


def _special(config: dict, key: str, default: str) -> str:
    value = config.get(key, default)
    return value["content"] if isinstance(value, dict) else value
