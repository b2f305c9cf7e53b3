"""The benchmark's fixed inputs: five B=1 requests shaped like DESIGN.md's anchors, and the batch-scoring states.

Shapes (rows x tokens of the longest row) on the synthesized checkpoints' tokenizer: about 1x77, 3x183,
1x416, 5x512 and 16x512. Text is drawn from a fixed word list with fixed seeds, so every run and every
system sees the same bytes; `recipe.benchmark` stores them with their sha256.
"""

from __future__ import annotations

import random

WORDS = (
    "refund",
    "charge",
    "order",
    "parcel",
    "late",
    "broken",
    "account",
    "card",
    "bank",
    "invoice",
    "please",
    "cancel",
    "upgrade",
    "price",
    "login",
    "error",
    "crash",
    "support",
    "urgent",
    "thanks",
    "angry",
    "happy",
    "delivery",
    "return",
    "replace",
    "subscription",
    "security",
    "fraud",
    "transfer",
    "balance",
    "today",
)


def words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


NOUL = {"type": "noul", "instructions": "Does the customer ask for a refund of the duplicate charge?"}
CHOICE4 = {
    "type": "choice",
    "instructions": "Which team should handle this?",
    "criteria": {
        "billing": "payments, refunds and invoices",
        "shipping": "parcels and delivery",
        "technical": "errors, crashes and logins",
        "other": None,
    },
}
SCORE5 = {
    "type": "score",
    "instructions": "How urgent is this ticket?",
    "criteria": ["not urgent", "low", "medium", "high", "critical"],
}


def _mixed(n: int) -> dict:
    kinds = (NOUL, CHOICE4, SCORE5)
    return {f"q{i}": {**kinds[i % 3], "instructions": f"{kinds[i % 3]['instructions']} ({i})"} for i in range(n)}


INPUTS: dict[str, dict] = {
    "1x77 noul": {"model": "english", "state": words(16, 1), "questions": {"refund": NOUL}},
    "3x183 mixed": {"model": "english", "state": words(99, 2), "questions": _mixed(3)},
    "1x416 choice16": {
        "model": "english",
        "state": words(202, 3),
        "questions": {
            "topic": {
                "type": "choice",
                "instructions": "Which topic is this ticket about?",
                "criteria": {f"topic{i}": words(6, 100 + i) for i in range(16)},
            }
        },
    },
    "5x512 long document": {"model": "english", "state": words(900, 4), "questions": _mixed(5)},
    "16x512 mixed": {"model": "english", "state": words(900, 5), "questions": _mixed(16)},
}

BATCH_QUESTIONS = {"refund": NOUL, "team": CHOICE4}


def batch_states(n: int = 1000, seed: int = 7) -> list[str]:
    """`n` states of 20 to 300 words, as DESIGN.md's batch-scoring anchor."""
    rng = random.Random(seed)
    return [words(rng.randint(20, 300), seed * 100000 + i) for i in range(n)]
