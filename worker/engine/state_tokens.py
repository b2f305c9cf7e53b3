"""A long state's leading (or trailing) token ids without tokenizing all of it.

Tokenizing costs about 0.9 us a token, so a 10,000-word state costs ~10 ms of host time, yet a row keeps at
most `max_len` tokens of it: the first ones (a text or JSON state) or the last ones (a conversation). For a
byte-level BPE tokenizer, a text cut where a non-whitespace character meets whitespace tokenizes, on each
side of the cut, exactly as the whole text does there: no added token, normalizer step, pre-tokenizer split
or BPE word spans such a boundary. So `state_ids` tokenizes only a character prefix (suffix) that holds
enough tokens, and `cut_safe` admits only tokenizers whose every part is known to keep that boundary; any
other tokenizer is tokenized whole, as before. Where a tokenizer keeps both kinds of boundary, what is
tokenized is also cut at such boundaries into pieces that one batch call encodes on the tokenizer's threads.

Why each admitted part keeps a boundary at K, where text[K-1] is not whitespace (str.isspace) and text[K] is
" ", "\\n" or "\\t":
- added tokens are matched first (leftmost-longest); a match spanning K would hold both text[K-1] and
  text[K], so no content may mix whitespace and non-whitespace. An `rstrip` token ending at K-1 eats the run
  after K in the whole text but not in the suffix; a `single_word` token starting at K (content starting with
  whitespace) matches in the suffix but not after a word character: both forbid suffix cuts only. `lstrip`
  stops at text[K-1], which Rust's char::is_whitespace (a subset of str.isspace) never includes.
- NFC never composes a whitespace character with what precedes it and never ends a non-whitespace
  character's normalization with whitespace (tests/worker/test_state_tokens.py checks every code point).
- ByteLevel's GPT-2 regex matches whitespace only as a leading " " or in runs of \\s alone, and \\s is within
  str.isspace (checked over all of Unicode), so one of its matches ends exactly at K. `add_prefix_space`
  prepends " " to a piece not starting with " ": suffix cuts are therefore made only before " ".
- BPE (without dropout) encodes each pre-token on its own; the listed post-processors add nothing when
  special tokens are not asked for.
"""

from __future__ import annotations

import json
import re

CHARS_PER_TOKEN = 8  # first window, in characters per needed token: English BPE text runs 3-5; 8 rarely retries
GROWTH = 4  # a window too short is grown this many times over
# Pieces for the tokenizer's threads: at least PIECE_CHARS characters (about 50 English tokens), at most MAX_PIECES;
# the sizes that gave batches the most on the H200 host (docs/records/tokenizer-pieces-h200-2026-12-04.json).
PIECE_CHARS = 256
MAX_PIECES = 16

_PREFIX_CUT = re.compile(r"\S[ \t\n]")  # re's \S is exactly `not str.isspace()` (checked in the tests)
_SUFFIX_CUT = re.compile(r"\S ")

_TOP_KEYS = {"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "post_processor"}
_TOP_KEYS |= {"decoder", "model"}
_BYTE_LEVEL_KEYS = {"type", "add_prefix_space", "trim_offsets", "use_regex"}
_BPE_KEYS = {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk"}
_BPE_KEYS |= {"byte_fallback", "ignore_merges", "vocab", "merges"}
_POST_PROCESSORS = {"TemplateProcessing", "BertProcessing", "RobertaProcessing", "ByteLevel"}


def cut_safe(backend) -> tuple[bool, bool]:
    """Whether `backend` (a tokenizers.Tokenizer) tokenizes every prefix ending before a whitespace run
    (first) and every suffix starting at one (second) exactly as the whole text there.

    The two differ only through added tokens: one with `rstrip`, or one starting with whitespace that is
    `single_word`, rules out suffixes alone. It serializes the tokenizer (~1 ms): ask once per tokenizer."""
    spec = json.loads(backend.to_str())
    if not isinstance(spec, dict) or not set(spec) <= _TOP_KEYS:
        return False, False
    if spec.get("truncation") is not None or spec.get("padding") is not None:
        return False, False
    if spec.get("normalizer") not in (None, {"type": "NFC"}):
        return False, False
    pre = spec.get("pre_tokenizer")
    if not isinstance(pre, dict) or pre.get("type") != "ByteLevel" or not set(pre) <= _BYTE_LEVEL_KEYS:
        return False, False
    if pre.get("use_regex") is not True or not isinstance(pre.get("add_prefix_space"), bool):
        return False, False
    model = spec.get("model")
    if not isinstance(model, dict) or model.get("type") != "BPE" or not set(model) <= _BPE_KEYS:
        return False, False
    if model.get("dropout") is not None:
        return False, False
    post = spec.get("post_processor")
    if post is not None and (not isinstance(post, dict) or post.get("type") not in _POST_PROCESSORS):
        return False, False
    suffix = True
    for token in spec.get("added_tokens") or []:
        content = token.get("content")
        if not isinstance(content, str) or not content:
            return False, False
        spaces = [c.isspace() for c in content]
        if any(spaces) and not all(spaces):
            return False, False
        if token.get("rstrip") or (token.get("single_word") and spaces[0]):
            suffix = False
    return True, suffix


def state_ids(backend, text: str, need: int, *, from_end: bool, safe: bool, split: bool = False) -> list[int]:
    """Ids of `text` (no special tokens added) of which at least the first `need` (from_end: the last `need`)
    equal the whole text's; the whole text's ids when `safe` is False or the text is short.

    `safe` is `cut_safe(backend)`'s answer for the direction asked, `split` its answer for suffixes (which
    implies prefixes): whether what is tokenized may be cut into pieces (`split_ids`). A cut piece is kept
    once it holds `need` ids: they are the whole text's first (last) ids, and the part cut off adds at least
    one more. A lone surrogate anywhere in `text` raises tokenizers' TypeError, as tokenizing the whole text
    does."""
    if safe and need > 0:
        span = need * CHARS_PER_TOKEN
        while span < len(text):
            if from_end:
                match = _SUFFIX_CUT.search(text, len(text) - span - 1)
                if match is not None:  # else no cut in the last `span` characters: a longer window
                    cut = match.start() + 1
                    ids = split_ids(backend, text[cut:], split)
                    if len(ids) >= need:
                        return _checked(backend, text, ids)
                span *= GROWTH
            else:
                match = _PREFIX_CUT.search(text, span - 1)
                if match is None:
                    break  # no cut at or after `span`: the whole text
                cut = match.start() + 1
                ids = split_ids(backend, text[:cut], split)
                if len(ids) >= need:
                    return _checked(backend, text, ids)
                span = cut * GROWTH
    return split_ids(backend, text, split)


def split_ids(backend, text: str, split: bool) -> list[int]:
    """The whole of `text`'s ids; with `split`, from the pieces `pieces(text)` encoded in one batch call, which
    tokenizers spreads over its threads. Every cut is before a " " that follows a non-whitespace character, a
    boundary that a tokenizer admitted for suffixes keeps on both sides (the module's docstring)."""
    chunks = pieces(text) if split else [text]
    return [i for encoding in backend.encode_batch_fast(chunks, add_special_tokens=False) for i in encoding.ids]


def pieces(text: str) -> list[str]:
    """`text` cut before " " after a non-whitespace character into at most MAX_PIECES pieces, each but the
    last at least PIECE_CHARS long (the last may be shorter); the pieces join to `text`."""
    n = min(MAX_PIECES, len(text) // PIECE_CHARS)
    chunks, start = [], 0
    for _ in range(n - 1):
        match = _SUFFIX_CUT.search(text, start + max(PIECE_CHARS, (len(text) - start) // n) - 1)
        if match is None:
            break
        cut = match.start() + 1
        chunks.append(text[start:cut])
        start, n = cut, n - 1
    chunks.append(text[start:])
    return chunks


def _checked(backend, text: str, ids: list[int]) -> list[int]:
    """`ids`, or tokenizers' TypeError where `text` holds a surrogate the cut left out (UTF-8 has none)."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return split_ids(backend, text, False)  # raises TypeError as the whole text's tokenization does
    return ids
