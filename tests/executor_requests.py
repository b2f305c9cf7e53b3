"""Requests both executor suites run (tests/worker with the kernels emulated, tests/gpu on the H200): one noul on
a short state; three mixed questions over a JSON state; a score over a conversation; 16 mixed questions over a
state past max_len (16 rows of 512 tokens). REQUESTS04: protocol 0.4.15's controls and option orders, which
change the rows an executor runs (shorter budgets, options in another order)."""

NOUL = {"type": "noul", "instructions": "Does the customer ask for a refund?"}
CHOICE = {
    "type": "choice",
    "instructions": "Which department?",
    "criteria": {"billing": "money", "shipping": "parcels", "tech": "bugs", "other": None},
}
SCORE = {"type": "score", "instructions": "How angry?", "criteria": ["calm", "annoyed", "angry", "furious"]}
REQUESTS = [
    {"state": "Please refund the duplicate charge.", "questions": {"q": NOUL}},
    {"state": {"ticket": 7, "text": "my parcel is late"}, "questions": {"c": CHOICE, "s": SCORE, "n": NOUL}},
    {"state": [{"role": "user", "content": "the app crashes " * 90}], "questions": {"s": SCORE}},
    {"state": "refund " * 600, "questions": {f"q{i}": [NOUL, CHOICE, SCORE][i % 3] for i in range(16)}},
]
REQUESTS04 = [
    {**REQUESTS[1], "max_len": 48, "head_max_len": 24, "min_confidence": 0.5},
    {
        "state": "refund " * 600,
        "questions": {
            "c": {**CHOICE, "option_order": [3, 1, 0, 2]},
            "s": {**SCORE, "option_order": [1, 0, 3, 2]},
            "n": {**NOUL, "option_order": [1, 0]},
        },
        "max_len": 200,
    },
]
