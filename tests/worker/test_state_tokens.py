"""worker.engine.state_tokens: ids from a cut text equal the whole text's where a row reads them, and the gate.

The contract is checked against the whole text's tokenization on random texts, short and long, for the
synthesized tokenizer and for variants the gate admits (a prefix space, NFC, added tokens of every kind it
allows); the gate's refusals are shown to be needed; and the two Unicode facts the argument rests on (NFC
never composes whitespace backward; the byte-level regex's \\s lies within str.isspace) are checked over all
code points.
"""

from __future__ import annotations

import itertools
import random
import re
import sys
import unicodedata

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken, Tokenizer, normalizers, pre_tokenizers

from laya_common.checkpoint import TOKENIZER
from worker.engine import state_tokens
from worker.engine.state_tokens import cut_safe, state_ids

WORDS = ("refund", "order", "it's", "we'll", "I'd", "don't", "café", "naïve", "Straße", "12345", "3.14", "a", "x")
ODD = (
    "e\u0301",  # e + combining acute: NFC composes it
    "\u0301",
    "\u0915\u094d",
    "日本語",
    "中文",
    "😀",
    "👍🏽",
    "\u200d",
    "\ufeff",
    "\u00a0",
    "\u3000",
    "\x1c",  # str.isspace() but not Unicode White_Space
    "\x85",
    "\u2028",
    "'s",
    "'",
    "!?",
    "...",
    '{"k": ',
    "},",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "[PAD]",
    "[UNK]",
    "<l>",
    "<r>",
    "Ǆ",
    "İ",
)
SPACES = (" ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", " \n", "\n  ", "\t\t", " \t ", "\r\n", "\u00a0 ", " \u0301")
PIECES = WORDS + ODD + SPACES
WEIGHTS = [12] * len(WORDS) + [1] * len(ODD) + [6] * len(SPACES)


def full_ids(backend, text: str) -> list[int]:
    return backend.encode(text, add_special_tokens=False).ids


def check(backend, text: str, need: int, from_end: bool, full: list[int] | None = None, gate=None) -> bool:
    """The contract (and more: the ids are a prefix/suffix of the whole text's), with what is tokenized cut into
    pieces where the tokenizer allows it, as `Tokenizer.encode_state` asks; whether a cut was made."""
    prefix_ok, suffix_ok = gate or cut_safe(backend)
    full = full_ids(backend, text) if full is None else full
    ids = state_ids(backend, text, need, from_end=from_end, safe=suffix_ok if from_end else prefix_ok, split=suffix_ok)
    assert len(ids) <= len(full)
    if from_end:
        assert ids[-need:] == full[-need:]
        assert ids == full[len(full) - len(ids) :]
    else:
        assert ids[:need] == full[:need]
        assert ids == full[: len(ids)]
    if len(full) <= need:
        assert ids == full
    return len(ids) < len(full)


def random_text(rng: random.Random, n: int) -> str:
    return "".join(rng.choices(PIECES, WEIGHTS, k=n))


@pytest.fixture(scope="module")
def synth_path(tiny_checkpoint):
    return str(tiny_checkpoint / TOKENIZER)


def variant(path: str, name: str) -> Tokenizer:
    """The synthesized tokenizer, or a variant built from it that the gate must still admit."""
    tok = Tokenizer.from_file(path)
    if name == "prefix-space":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    if name in ("nfc", "nfc-added"):
        tok.normalizer = normalizers.NFC()
    if name == "nfc-added":
        tok.add_tokens(
            [
                AddedToken("  ", normalized=False),
                AddedToken("\n\n", normalized=True),
                AddedToken("<l>", lstrip=True),
                AddedToken("'s", single_word=True, normalized=True),
                AddedToken("café", normalized=True),
            ]
        )
    if name == "rstrip":  # admitted for prefixes only
        tok.add_special_tokens([AddedToken("<r>", rstrip=True)])
    return tok


ADMITTED = {
    "synth": (True, True),
    "prefix-space": (True, True),
    "nfc": (True, True),
    "nfc-added": (True, True),
    "rstrip": (True, False),
}


@pytest.fixture(scope="module", params=list(ADMITTED))
def admitted(request, synth_path):
    tok = variant(synth_path, request.param)
    assert cut_safe(tok) == ADMITTED[request.param]
    return tok


def test_synthesized_tokenizer_is_cut_safe(synth_path):
    assert cut_safe(Tokenizer.from_file(synth_path)) == (True, True)


# -- the contract on random texts ------------------------------------------------------------------------

PIECE = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(ODD),
    st.sampled_from(SPACES),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=3),
)
NEED = st.integers(1, 600)


# Texts that every admitted tokenizer cuts (long, a small `need`, from the start), run first by Hypothesis whatever
# it draws: what it draws depends on the modules loaded before (recent Hypothesis mixes their constants into
# what it generates), and in a full run it once drew no text long enough to cut.
SURE_CUTS = [([random_text(random.Random(k), 300)], 4, False) for k in range(5)]


def test_contract_on_random_texts(admitted):
    cuts = []

    @settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(pieces=st.lists(PIECE, max_size=400), need=st.one_of(NEED, st.integers(1, 8)), from_end=st.booleans())
    def run(pieces, need, from_end):
        cuts.append(check(admitted, "".join(pieces), need, from_end))

    for pieces, need, from_end in SURE_CUTS:
        run = example(pieces=pieces, need=need, from_end=from_end)(run)
    run()
    assert sum(cuts) >= len(SURE_CUTS), cuts  # the long-text test below cuts most


def test_contract_on_long_texts(admitted):
    """Thousands of words, so the cut path is the usual one: it must be taken in most cases."""
    cuts = []
    suffix_ok = cut_safe(admitted)[1]

    @settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(seed=st.integers(0, 2**32), n=st.integers(2_000, 12_000), need=NEED, end=st.booleans())
    def run(seed, n, need, end):
        cuts.append(check(admitted, random_text(random.Random(seed), n), need, end) or (end and not suffix_ok))

    run()
    assert sum(cuts) >= 0.9 * len(cuts), cuts


def test_contract_at_every_need_and_window(synth_path):
    """One long text, every `need` the window crosses a growth step for, both directions, and texts made of
    long no-cut stretches (a window must grow) or with none at all (the whole text)."""
    tok = Tokenizer.from_file(synth_path)
    rng = random.Random(7)
    text = random_text(rng, 3_000)
    for need in [*range(1, 40), 100, 255, 256, 511, 512, 513, 600, 5_000, 10**6]:
        for from_end in (False, True):
            check(tok, text, need, from_end)
    blobs = " ".join("".join(rng.choices("abc,.:", k=rng.randrange(1, 20_000))) for _ in range(8))
    for text in (blobs, "x" * 50_000, " " * 50_000, "\n".join(["word"] * 10_000), "a" + " " * 40_000 + "b"):
        for need in (1, 64, 512):
            for from_end in (False, True):
                check(tok, text, need, from_end)


@pytest.mark.parametrize("chars_per_token", [1, 6, 7])
def test_contract_with_tight_windows(synth_path, monkeypatch, chars_per_token):
    """First windows near (or far below) the text's own characters per token, so that windows fall one id
    short, or several, and grow: the contract still holds at every `need`."""
    monkeypatch.setattr(state_tokens, "CHARS_PER_TOKEN", chars_per_token)
    monkeypatch.setattr(state_tokens, "GROWTH", 2)
    tok = Tokenizer.from_file(synth_path)
    text = random_text(random.Random(13), 2_500)
    full, gate = full_ids(tok, text), cut_safe(tok)
    cuts = [check(tok, text, n, end, full, gate) for n in range(1, 400) for end in (False, True)]
    assert all(cuts)


def test_a_long_state_is_cut(synth_path):
    tok = Tokenizer.from_file(synth_path)
    text = random_text(random.Random(3), 10_000)
    full = full_ids(tok, text)
    for from_end in (False, True):
        ids = state_ids(tok, text, 512, from_end=from_end, safe=True)
        assert 512 <= len(ids) < len(full) // 4


@settings(max_examples=200, deadline=None, derandomize=True)
@given(text=st.text(st.sampled_from("ab. \t\n\u00a0"), max_size=3_000))
def test_pieces_join_to_the_text_and_cut_before_a_space_after_a_word(text):
    chunks = state_tokens.pieces(text)
    assert "".join(chunks) == text
    assert len(chunks) <= state_tokens.MAX_PIECES
    assert all(len(c) >= state_tokens.PIECE_CHARS for c in chunks[:-1])
    for before, after in itertools.pairwise(chunks):
        assert after.startswith(" ") and not before[-1].isspace()


@pytest.mark.parametrize("piece_chars", [1, 16, 256])
def test_ids_of_pieces_are_the_whole_texts(admitted, monkeypatch, piece_chars):
    """Cut before every eligible space or at wide intervals: the pieces' ids, joined, are the whole text's
    wherever the tokenizer keeps suffix cuts (and the pieces are not made where it does not)."""
    monkeypatch.setattr(state_tokens, "PIECE_CHARS", piece_chars)
    monkeypatch.setattr(state_tokens, "MAX_PIECES", 10_000)
    split = cut_safe(admitted)[1]
    rng = random.Random(piece_chars)
    for n in (10, 300, 3_000):
        text = random_text(rng, n)
        assert state_tokens.split_ids(admitted, text, split) == full_ids(admitted, text)


def test_a_lone_surrogate_raises_as_the_whole_text_does(synth_path):
    tok = Tokenizer.from_file(synth_path)
    text = random_text(random.Random(5), 3_000)
    with pytest.raises(TypeError):
        full_ids(tok, text + "\ud800")
    for bad, from_end in ((text + " \ud800", False), ("\udfff " + text, True), (text + "\ud83d\ude00", False)):
        with pytest.raises(TypeError):
            state_ids(tok, bad, 16, from_end=from_end, safe=True)


# -- the gate --------------------------------------------------------------------------------------------


def refused(path: str, name: str) -> Tokenizer:
    tok = Tokenizer.from_file(path)
    if name == "metaspace":
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
    elif name == "lowercase":
        tok.normalizer = normalizers.Lowercase()
    elif name == "nfkc":
        tok.normalizer = normalizers.NFKC()
    elif name == "sequence-normalizer":
        tok.normalizer = normalizers.Sequence([normalizers.NFC()])
    elif name == "sequence-pre-tokenizer":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.ByteLevel(add_prefix_space=False)])
    elif name == "no-regex":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    elif name == "dropout":
        tok.model.dropout = 0.1
    elif name == "mixed-token":
        tok.add_tokens([AddedToken("a b")])
    elif name == "truncation":
        tok.enable_truncation(64)
    return tok


REFUSED = (
    "metaspace",
    "lowercase",
    "nfkc",
    "sequence-normalizer",
    "sequence-pre-tokenizer",
    "no-regex",
    "dropout",
    "mixed-token",
    "truncation",
)


@pytest.mark.parametrize("name", REFUSED)
def test_gate_refuses(synth_path, name):
    tok = refused(synth_path, name)
    assert cut_safe(tok) == (False, False)
    text = random_text(random.Random(11), 3_000) + " a b"
    if name == "dropout":
        return  # its ids differ from one call to the next
    for from_end in (False, True):
        assert state_ids(tok, text, 16, from_end=from_end, safe=False) == full_ids(tok, text)


def test_gate_refuses_suffixes_after_an_rstrip_or_single_word_whitespace_token(synth_path):
    rstrip = Tokenizer.from_file(synth_path)
    rstrip.add_special_tokens([AddedToken("<r>", rstrip=True)])
    single = Tokenizer.from_file(synth_path)
    single.add_tokens([AddedToken("  ", single_word=True, normalized=False)])
    for tok in (rstrip, single):
        assert cut_safe(tok) == (True, False)
    # why: the whole text tokenizes the run after the cut otherwise than the suffix alone does
    for tok, text, cut in ((rstrip, "aa<r>   bb", 5), (single, "ab  .", 2)):
        tail = full_ids(tok, text[cut:])
        assert full_ids(tok, text)[-len(tail) :] != tail


def test_the_refusals_are_needed(synth_path):
    """Cuts the gate forbids do change ids: a token mixing whitespace, and a prefix space before "\\n"
    (suffix cuts are made before " " alone)."""
    mixed = refused(synth_path, "mixed-token")
    assert full_ids(mixed, "xa b")[: len(full_ids(mixed, "xa"))] != full_ids(mixed, "xa")
    spaced = variant(synth_path, "prefix-space")
    tail = full_ids(spaced, "\nfoo")
    assert full_ids(spaced, "x\nfoo")[-len(tail) :] != tail


# -- the Unicode facts -----------------------------------------------------------------------------------

ALL = [chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c < 0xE000]
CUTS = (" ", "\n", "\t")


def test_nfc_never_composes_whitespace_backward():
    for w in CUTS:
        assert unicodedata.combining(w) == 0 and unicodedata.normalize("NFD", w) == w
    for c in ALL:
        parts = unicodedata.decomposition(c).split()
        if len(parts) == 2 and not parts[0].startswith("<"):  # a canonical pair: what NFC composes
            assert chr(int(parts[1], 16)) not in CUTS and not c.isspace(), hex(ord(c))
    nfc = unicodedata.normalize
    for c in ALL:
        head = nfc("NFC", c)
        if not c.isspace():
            assert not head[-1].isspace(), hex(ord(c))
        for w in CUTS:
            assert nfc("NFC", c + w) == head + w, hex(ord(c))
    for c in ALL[::7]:  # a mark after the cut does not reach back across it either
        assert nfc("NFC", c + " \u0301") == nfc("NFC", c) + " \u0301", hex(ord(c))


def test_tokenizers_nfc_never_composes_whitespace_backward():
    nfc = normalizers.NFC()
    for c in ALL[::3]:
        assert nfc.normalize_str(c + " ") == nfc.normalize_str(c) + " ", hex(ord(c))


def test_python_re_non_space_is_exactly_not_isspace():
    text = "".join(ALL)
    assert set(re.findall(r"\S", text)) == {c for c in ALL if not c.isspace()}


def test_byte_level_whitespace_lies_within_isspace():
    """Every character str.isspace() rejects is not \\s to the byte-level regex: followed by "  x" it ends a
    pre-token of its own, where a \\s character would join the following spaces (`\\s+(?!\\S)`)."""
    pre = pre_tokenizers.ByteLevel(add_prefix_space=False)
    chars = [c for c in ALL if not c.isspace()]
    for start in range(0, len(chars), 50_000):
        chunk = chars[start : start + 50_000]
        ends = {end for _, (_, end) in pre.pre_tokenize_str("".join(c + "  x" for c in chunk))}
        missing = [hex(ord(c)) for i, c in enumerate(chunk) if 4 * i + 1 not in ends]
        assert not missing, missing[:20]
    # and the premise of that probe: a whitespace character does join them
    ends = {end for _, (_, end) in pre.pre_tokenize_str("\u00a0  x")}
    assert 1 not in ends


def test_every_boundary_character_cuts_cleanly(synth_path):
    """The property itself, on the whole pipeline, for every BMP character that may end a prefix."""
    tok = Tokenizer.from_file(synth_path)
    chars = [c for c in ALL[:0xF800] if not c.isspace()]
    for w in CUTS:
        tail = full_ids(tok, w + "y")
        whole = tok.encode_batch_fast(["x" + c + w + "y" for c in chars], add_special_tokens=False)
        head = tok.encode_batch_fast(["x" + c for c in chars], add_special_tokens=False)
        bad = [hex(ord(c)) for c, a, b in zip(chars, whole, head, strict=True) if a.ids != b.ids + tail]
        assert not bad, bad[:20]
