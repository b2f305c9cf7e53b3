"""hypothesis strategies for requests, built from small pieces.

Texts carry "[MASK]" (the reference replaces it with a space everywhere), non-ASCII, arbitrary
unicode and, now and then, more than 600 words. States are strings, JSON objects, conversation
lists (truncated from the left) or empty. Questions come per type with every criteria shape the
reference accepts; `invalid_questions` holds the shapes it rejects.
"""

from __future__ import annotations

import random

from hypothesis import strategies as st

# fmt: off
WORDS = [
    "the", "a", "and", "or", "but", "refund", "charge", "order", "account", "customer", "payment", "card", "bank",
    "invoice", "delivery", "package", "late", "broken", "return", "cancel", "subscription", "plan", "price",
    "discount", "email", "phone", "password", "login", "error", "crash", "bug", "support", "agent", "ticket",
    "urgent", "please", "thanks", "sorry", "hello", "yes", "no", "maybe", "never", "today", "week", "contract",
    "policy", "privacy", "fraud", "transfer", "balance", "question", "answer", "statement", "holds", "true",
    "false", "level", "score", "choice", "option", "good", "bad", "neutral", "angry", "happy", "wants", "asks",
    "says", "product", "service", "shipping", "store", "app", "update", "device", "slow",
]
# fmt: on
NON_ASCII = ["café", "naïve", "Zürich", "straße", "日本語", "中文", "привет", "مرحبا", "🙂", "👍", "€", "—", "ｆｕｌｌ"]
MASK = "[MASK]"
SPECIAL_TEXTS = [
    "",
    " ",
    MASK,
    "café 日本語 🙂",
    f"a {MASK} b",
    MASK * 3,
    "  padded  ",
    "line\nbreak\ttab",
    "[mask]",
    "[MASK",
    "Zürich straße привет مرحبا",
    "👍👍👍",
    "\u00a0\u3000",
    "0",
    "null",
    "true",
    '{"k": 1}',
]


def _words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    pool = WORDS * 4 + NON_ASCII + [MASK]
    return " ".join(rng.choice(pool) for _ in range(n))


word = st.sampled_from(WORDS + NON_ASCII + [MASK])
short_texts = st.lists(word, max_size=10).map(" ".join)
free_texts = st.text(max_size=24)  # any unicode (no surrogates): control characters, combining marks, ...
texts = st.one_of(short_texts, st.sampled_from(SPECIAL_TEXTS), free_texts)
# 49-120 words: an option text past the 48-token cap
medium_texts = st.builds(_words, st.integers(49, 120), st.integers(0, 2**16))
# more than 600 words: a state or instructions past every budget
long_texts = st.builds(_words, st.integers(601, 900), st.integers(0, 2**16))
any_texts = st.one_of(texts, texts, medium_texts, long_texts)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**9), 10**9),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
    max_leaves=6,
)

# ---------------------------------------------------------------------------------------------- states
turns = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"]), "content": any_texts})
conversations = st.one_of(
    st.lists(turns, max_size=4),
    st.builds(
        lambda n, seed: [{"role": "user", "content": _words(80, seed + i)} for i in range(n)],
        st.integers(8, 12),
        st.integers(0, 2**16),
    ),  # needs left truncation
    st.lists(texts, max_size=4),
)
states = st.one_of(
    any_texts,
    st.dictionaries(texts, json_values, max_size=5),
    st.builds(
        lambda text, extra: {"ticket": text, **extra}, any_texts, st.dictionaries(texts, json_values, max_size=2)
    ),
    conversations,
    st.sampled_from(["", {}, []]),
)

# ------------------------------------------------------------------------------------------- questions
question_ids = st.one_of(st.sampled_from(["b", "a", "10", "2", "q1", "日本", MASK, "", " "]), st.text(max_size=8))
instructions = st.one_of(any_texts, any_texts, json_values)  # non-strings are JSON-encoded by the reference
criterion_values = st.one_of(st.none(), st.just(""), st.just(0), st.just(False), texts, medium_texts, json_values)
option_keys = st.one_of(short_texts, st.sampled_from(SPECIAL_TEXTS), free_texts, medium_texts)


def _question(kind: str, criteria=None, labels=None, with_criteria: bool = True):
    required = {"type": st.just(kind), "instructions": instructions}
    if with_criteria:
        required["criteria"] = criteria
    optional = {"note": json_values}  # keys the reference ignores
    if labels is not None:
        optional["labels"] = labels
    return st.fixed_dictionaries(required, optional=optional)


choice_criteria = st.one_of(
    st.dictionaries(option_keys, criterion_values, min_size=1, max_size=8),
    st.lists(option_keys, min_size=1, max_size=8),  # duplicates collapse to one option
    st.dictionaries(short_texts, medium_texts, min_size=4, max_size=8),  # the per-option budget path
    st.builds(lambda n: [f"option {i}" for i in range(n)], st.integers(9, 40)),
)
score_criteria = st.one_of(
    st.lists(criterion_values, min_size=1, max_size=8),
    st.lists(medium_texts, min_size=3, max_size=6),
)


@st.composite
def noul_keys(draw) -> str:
    """'true' / 'false' in any letter case: the reference lower-cases noul criteria keys."""
    key = draw(st.sampled_from(["true", "false"]))
    upper = draw(st.lists(st.booleans(), min_size=len(key), max_size=len(key)))
    return "".join(c.upper() if u else c for c, u in zip(key, upper, strict=True))


noul_criteria = st.one_of(st.none(), st.dictionaries(noul_keys(), criterion_values, max_size=3))
label_texts = st.one_of(short_texts, st.sampled_from(SPECIAL_TEXTS), free_texts)


def _distinct_labels(pair) -> bool:
    f, t = pair
    return bool(f.strip()) and bool(t.strip()) and f.strip() != t.strip()


valid_labels = st.one_of(
    st.none(),  # the reference reads labels: null as the default pair
    st.tuples(label_texts, label_texts).filter(_distinct_labels).map(lambda p: {"false": p[0], "true": p[1]}),
    st.tuples(label_texts, label_texts).filter(_distinct_labels).map(lambda p: {"true": p[1], "false": p[0]}),
    st.sampled_from(
        [
            {"false": "B", "true": "A"},
            {"false": " no\u00a0", "true": "\u3000yes"},
            {"false": "non [MASK]", "true": "日本語 🙂"},
        ]
    ),
)

choice_questions = _question("choice", choice_criteria)
score_questions = _question("score", score_criteria)
noul_questions = st.one_of(
    _question("noul", with_criteria=False, labels=valid_labels),
    _question("noul", noul_criteria, labels=valid_labels),
)
valid_questions = st.one_of(choice_questions, score_questions, noul_questions)

# ------------------------------------------------------------------------------------ invalid questions
not_a_string = st.one_of(
    st.none(), st.booleans(), st.integers(), st.lists(texts, max_size=2), st.dictionaries(texts, texts, max_size=2)
)
unhashable = st.one_of(st.lists(texts, max_size=2), st.dictionaries(texts, texts, max_size=2))
bad_labels = st.one_of(
    st.text(max_size=5),
    st.lists(texts, max_size=2),
    st.integers(),
    st.dictionaries(st.sampled_from(["false", "true", "True", "FALSE", "yes", "no"]), label_texts, max_size=3).filter(
        lambda d: set(d) != {"false", "true"}
    ),
    st.fixed_dictionaries({"false": not_a_string, "true": label_texts}),
    st.fixed_dictionaries({"false": label_texts, "true": not_a_string}),
    st.fixed_dictionaries({"false": st.sampled_from(["", " ", "\u3000", "\t\n"]), "true": label_texts}),
    label_texts.map(lambda s: {"false": s, "true": f" {s}\u00a0"}),  # equal once stripped
    st.just({"false": "A", "true": "B", "maybe": "C"}),
)


def _overflowing_choice(n: int, seed: int) -> dict:
    """A choice whose option markers run past max_len once the per-option budget caps each at 4 tokens."""
    rng = random.Random(seed)
    options = [f"{rng.choice(WORDS)} {rng.choice(WORDS)} {rng.choice(WORDS)} {i}" for i in range(n)]
    return {"type": "choice", "instructions": "pick one", "criteria": options}


# A lone surrogate ("\ud800") is a valid JSON escape but not a character: the tokenizer refuses it, so the
# reference rejects any question that has one in a text it tokenizes (and any state holding one).
surrogates = st.text(alphabet=st.characters(categories=["Cs"]), min_size=1, max_size=2)
with_surrogate = st.builds(lambda a, s, b: f"{a}{s}{b}", short_texts, surrogates, short_texts)

invalid_questions = st.one_of(
    # a lone surrogate in a text the reference tokenizes
    st.fixed_dictionaries({"type": st.just("noul"), "instructions": with_surrogate}),
    st.builds(lambda t: {"type": "choice", "instructions": "x", "criteria": ["a", t]}, with_surrogate),
    st.builds(lambda t: {"type": "choice", "instructions": "x", "criteria": {"a": t}}, with_surrogate),
    st.builds(lambda t: {"type": "score", "instructions": "x", "criteria": ["a", {"d": t}]}, with_surrogate),
    st.builds(lambda t: {"type": "noul", "instructions": "x", "labels": {"false": t, "true": "y"}}, with_surrogate),
    # not a question at all
    st.one_of(texts, st.integers(), st.none(), st.lists(texts, max_size=2)),
    # unknown or missing type (a list type is unhashable: the reference raises TypeError, still a rejection)
    st.fixed_dictionaries(
        {
            "type": st.one_of(st.sampled_from(["Choice", "bool", "yesno", "", "NOUL"]), not_a_string),
            "instructions": texts,
            "criteria": st.lists(texts, min_size=1, max_size=3),
        }
    ),
    st.fixed_dictionaries({"instructions": texts, "criteria": st.lists(texts, min_size=1, max_size=3)}),
    # no instructions
    st.fixed_dictionaries(
        {"type": st.sampled_from(["choice", "score", "noul"]), "criteria": st.lists(texts, min_size=1, max_size=3)}
    ),
    # choice criteria of the wrong shape, empty, or a list holding a non-string
    st.fixed_dictionaries(
        {
            "type": st.just("choice"),
            "instructions": texts,
            "criteria": st.one_of(st.just({}), st.just([]), st.none(), texts, st.integers(), st.booleans()),
        },
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["choice", "score"]), "instructions": texts}),  # no criteria
    st.builds(
        lambda head, bad, tail: {"type": "choice", "instructions": "x", "criteria": [*head, bad, *tail]},
        st.lists(short_texts, max_size=2),
        st.one_of(
            st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), unhashable
        ),
        st.lists(short_texts, max_size=2),
    ),
    # score criteria not a non-empty list
    st.fixed_dictionaries(
        {
            "type": st.just("score"),
            "instructions": texts,
            "criteria": st.one_of(
                st.dictionaries(texts, texts, max_size=3), st.none(), texts, st.integers(), st.just([])
            ),
        },
    ),
    # noul criteria not a dict, or keyed other than true/false
    st.fixed_dictionaries(
        {
            "type": st.just("noul"),
            "instructions": texts,
            "criteria": st.one_of(texts, st.integers(), st.booleans(), st.lists(texts, max_size=2)),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("noul"),
            "instructions": texts,
            "criteria": st.dictionaries(st.one_of(noul_keys(), texts), texts, min_size=1, max_size=3).filter(
                lambda d: not {k.lower() for k in d} <= {"true", "false"}
            ),
        }
    ),
    # labels on a question that is not noul (even labels: null), bad labels on a noul
    st.fixed_dictionaries(
        {
            "type": st.just("choice"),
            "instructions": texts,
            "criteria": st.lists(texts, min_size=1, max_size=3),
            "labels": st.one_of(st.none(), valid_labels),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("score"),
            "instructions": texts,
            "criteria": st.lists(texts, min_size=1, max_size=3),
            "labels": st.one_of(st.none(), valid_labels),
        }
    ),
    st.fixed_dictionaries({"type": st.just("noul"), "instructions": texts, "labels": bad_labels}),
    st.builds(
        lambda s: {"type": "noul", "instructions": "x", "labels": {"false": f"\t{s}", "true": f"{s}\u3000"}},
        label_texts.filter(str.strip),
    ),  # labels equal once stripped
    # options that overflow the head budget, so markers fall past max_len
    st.builds(_overflowing_choice, st.integers(140, 260), st.integers(0, 2**16)),
)


@st.composite
def requests(draw, questions=valid_questions, min_questions: int = 0, max_questions: int = 4):
    """A payload with `min_questions`..`max_questions` questions drawn from `questions`."""
    ids = draw(st.lists(question_ids, min_size=min_questions, max_size=max_questions, unique=True))
    payload = {"state": draw(states), "questions": {qid: draw(questions) for qid in ids}}
    if draw(st.booleans()):
        payload = {"model": "english", **payload}
    return payload


mixed_questions = st.one_of(valid_questions, valid_questions, valid_questions, invalid_questions)

# ------------------------------------------------------------------------------------- invalid payloads
invalid_payloads = st.one_of(
    st.one_of(texts, st.integers(), st.none(), st.lists(texts, max_size=2)),  # not an object
    requests(min_questions=1, max_questions=2).map(lambda p: {k: v for k, v in p.items() if k != "state"}),
    requests(min_questions=1, max_questions=2).map(lambda p: {k: v for k, v in p.items() if k != "questions"}),
    st.builds(
        lambda p, q: {**p, "questions": q},
        requests(max_questions=0),
        st.one_of(st.none(), texts, st.integers(), st.lists(valid_questions, max_size=2)),
    ),
    st.builds(
        lambda p, m: {**p, "model": m},
        requests(min_questions=1, max_questions=2),
        st.sampled_from(
            ["multilingual", "ML", " typed ", "laya-typed-decisions", "convaiinnovations/laya-multilingual"]
        ),  # Laya models these checkpoints do not serve
    ),
)


# ------------------------------------------------------------------------------ protocol 0.4.15's requests
BUCKETS = [f"{t}:{s}" for t in ("choice", "score", "noul") for s in ("2", "3-5", "6-10", "11+")] + ["default"]
thresholds = st.floats(0.0, 1.0)
# what is valid comes first: the simplest draws (and most draws) are requests laya answers
CONTROLS04 = {
    "max_len": (st.one_of(st.integers(128, 512), st.integers(16, 96)), [0, -3, True, 64.0]),
    "head_max_len": (st.one_of(st.integers(16, 256), st.integers(8, 40)), [0, False]),
    "min_confidence": (
        st.one_of(thresholds, st.dictionaries(st.sampled_from(BUCKETS), thresholds, min_size=1, max_size=5)),
        [0, 1, 1.5, -0.1, True, "0.5", {}, {"choice:3": 0.2}, {"default": 2}, [0.5]],
    ),
    "task": (st.one_of(texts, json_values), []),
    "lang": (st.sampled_from(["de", "en", "en-GB", "zz", ""]), [5, ["de"]]),
    "lang_guess": (st.sampled_from(["fr", "en"]), [True]),
    "hooks": (st.none(), [["x"]]),
}


@st.composite
def controls04(draw) -> dict:
    """Each control absent, null, a value laya takes, or (now and then) one it refuses."""
    controls = {}
    for name, (valid, invalid) in CONTROLS04.items():
        how = draw(st.integers(0, 24))
        if how < 12:
            continue
        if how < 14:
            controls[name] = None
        elif how < 24 or not invalid:
            controls[name] = draw(valid)
        else:
            controls[name] = draw(st.sampled_from(invalid))
    return controls


# choice labels 0.4 takes besides strings (numbers and booleans), and the ones it refuses (null, nested, twice)
scalar_labels = st.one_of(option_keys, st.integers(-5, 50), st.floats(-10, 10, allow_nan=False), st.booleans())
choice_lists04 = st.one_of(
    st.lists(scalar_labels, min_size=1, max_size=8, unique_by=lambda x: (type(x) is str, x)),
    st.lists(st.one_of(scalar_labels, st.none(), st.lists(texts, max_size=1)), min_size=1, max_size=4),
)
questions04 = st.one_of(
    _question("choice", choice_lists04),
    # past 0.4's counts: 100 options of a choice, 32 levels of a score (a 413)
    st.builds(
        lambda n: {"type": "choice", "instructions": "pick", "criteria": [f"o{i}" for i in range(n)]},
        st.integers(101, 110),
    ),
    st.builds(
        lambda n: {"type": "score", "instructions": "rate", "criteria": [f"l{i}" for i in range(n)]},
        st.integers(33, 40),
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("score"),
            "instructions": texts,
            "criteria": st.lists(st.one_of(texts, st.none()), min_size=1, max_size=4),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["noul", "choice"]), "instructions": st.sampled_from(["", "  ", [], {}, None, 0])},
        optional={"criteria": st.just(["a", "b"])},
    ),
)


def _n_options(question: dict) -> int:
    criteria = question.get("criteria")
    if question.get("type") == "noul":
        return 2
    return len(criteria) if isinstance(criteria, dict | list) else 0


@st.composite
def ordered(draw, question: dict) -> dict:
    """`question`, now and then with an option_order: a permutation of its options, or something else."""
    how = draw(st.integers(0, 9))
    if how < 5 or not isinstance(question, dict):
        return question
    n = _n_options(question)
    if how < 9:
        order = draw(st.permutations(list(range(n))))
    else:
        order = draw(st.sampled_from([[0], list(range(n + 1)), [0] * n, [True] * n, None, "01", [1.0] * n]))
    return {**question, "option_order": order}


def _taken_by_04(question: dict) -> bool:
    """Whether laya 0.4 takes a question `valid_questions` drew: it refuses blank instructions and null levels."""
    instructions = question["instructions"]
    if instructions is None or instructions in ("", [], {}) or str(instructions).isspace():
        return False
    return not (question["type"] == "score" and None in question["criteria"])


question_ids04 = st.one_of(
    st.sampled_from(["b", "a", "10", "2", "q1", "日本", MASK]), st.text(min_size=1, max_size=8).filter(str.strip)
)


@st.composite
def requests04(draw, max_questions: int = 4) -> dict:
    """A protocol 0.4 body: questions as `requests` draws them, now and then with 0.4's own shapes and an option
    order; its model mostly one these checkpoints serve (laya 0.4 would otherwise choose a checkpoint by the
    text's language); the request controls; and, rarely, no state or another kind of one."""
    ids = draw(
        st.lists(
            st.integers(0, 29).flatmap(lambda how: question_ids04 if how else question_ids),
            max_size=max_questions,
            unique=True,
        )
    )
    taken = valid_questions.filter(_taken_by_04)
    kinds = st.integers(0, 19).flatmap(
        lambda how: taken if how < 17 else st.one_of(questions04, valid_questions, invalid_questions)
    )
    questions = {qid: draw(kinds.flatmap(ordered)) for qid in ids}
    how = draw(st.integers(0, 59))
    state = draw(states) if how < 56 else [None, 7, True, None][how - 56]
    model = draw(
        st.integers(0, 19).map(lambda i: ["english", "en", "Default ", "org/repo", "./weights"][max(0, i - 15)])
    )
    payload = {"model": model, "state": state, "questions": questions, **draw(controls04())}
    if how == 59:
        del payload["state"]
    return payload


# A body whose score's entropy confidence rounds otherwise in float32 (laya 0.3.20) than in float64 (0.4.15)
ENTROPY_WIDENED = {
    "model": "english",
    "state": _words(797, 119),
    "questions": {
        "b": {"type": "choice", "instructions": _words(49, 2), "criteria": [f"option {i}" for i in range(9)]},
        "a": {"type": "noul", "instructions": "a [MASK] b"},
        "0": {
            "type": "score",
            "instructions": "delivery late update crash payment yes straße naïve wants straße",
            "criteria": [_words(119, 3000), _words(62, 444), _words(115, 262), _words(119, 24581)],
        },
    },
}
# Two labels whose answer keys read alike: "true" and true (laya writes the key twice)
KEYS_ALIKE = {
    "model": "english",
    "state": "",
    "questions": {"b": {"type": "choice", "instructions": "x", "criteria": ["true", True]}},
}
