"""The cuda executor on a Hopper GPU against the fp32 reference executor on the same GPU (marked gpu).

Tiny and large synthesized checkpoints, each with a bundle built for its dimensions (LAYA_TEST_BUNDLE_TINY,
LAYA_TEST_BUNDLE_LARGE; default bundles/tiny and bundles/optimized) whose tables are exported on this GPU.
Every bucket edge (1 and 16 rows; 16, 17, 511 and 512 tokens; rows with fewer options than the widest;
2048 markers over 16 questions), graphs against eager, a replay after a larger shape, both RoPE modes,
and a real CUDA error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from executor_requests import CHOICE, NOUL, REQUESTS, REQUESTS04, SCORE

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = {
    "tiny": os.environ.get("LAYA_TEST_BUNDLE_TINY", "bundles/tiny"),
    "large": os.environ.get("LAYA_TEST_BUNDLE_LARGE", "bundles/optimized"),
}
# Distance to the fp32 reference allowed per probability. On these random full-size weights laya 0.3.20's own
# bf16 path reaches 0.07 to 0.27 from fp32 per class (docs/records/parity-h200-2026-12-04.json, an H200 run);
# a binding or ordering fault moved probabilities by 0.2 to 0.5. The parity recipe compares class by class.
MAX_DP = 0.1
MASKED_LOGIT = -1e4


class Setup:
    def __init__(self, size: str, workdir: Path) -> None:
        from recipe.gpu_workdir import bundle_for
        from worker.engine.engine import Engine
        from worker.engine.executors import ExecutorOptions

        built = ROOT / BUNDLES[size]
        if not (built / "manifest.json").is_file():
            pytest.fail(f"no bundle at {built}: build it with `laya-bundle build {built} --model {size}`")
        self.checkpoint, self.bundle = bundle_for(workdir, size, built)
        self.reference = Engine(self.checkpoint, executor="reference", options=ExecutorOptions(device="cuda"))
        self.graphs = Engine(self.checkpoint, executor="cuda", options=ExecutorOptions(bundle=self.bundle))
        self.eager = Engine(self.checkpoint, executor="cuda", options=ExecutorOptions(bundle=self.bundle, eager=True))

    def outputs(self, engine, rows):
        from worker.engine.batch import Batch

        return engine.executor.forward(Batch.from_rows(rows, engine.tokenizer.pad_id, engine.executor.admits))


@pytest.fixture(scope="module", params=["tiny", "large"])
def setup(request, tmp_path_factory):
    workdir = Path(os.environ.get("LAYA_GPU_WORKDIR") or tmp_path_factory.mktemp("gpu"))
    return Setup(request.param, workdir)


def probabilities(logits: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
    out = []
    for row, keep in zip(logits, mask, strict=True):
        z = row[keep].astype(np.float64)
        p = np.exp(z - z.max())
        out.append(p / p.sum())
    return out


def assert_close_to_reference(setup, engine, rows) -> None:
    mask = np.array([[k < len(r.markers) for k in range(max(len(r.markers) for r in rows))] for r in rows])
    ours, want = setup.outputs(engine, rows), setup.outputs(setup.reference, rows)
    assert ours.logits.shape == want.logits.shape
    assert (ours.logits[~mask] == MASKED_LOGIT).all(), "logits past a row's options must be masked"
    assert np.isfinite(ours.logits).all() and np.isfinite(ours.act_probs).all()
    for r, (p, q) in enumerate(zip(probabilities(ours.logits, mask), probabilities(want.logits, mask), strict=True)):
        assert np.abs(p - q).max() <= MAX_DP, f"row {r}: option probabilities {p} vs fp32 {q}"
    assert np.abs(ours.act_probs - want.act_probs).max() <= MAX_DP


def row_of_length(engine, length: int, question: dict):
    """A row of exactly `length` tokens: the question over a state of one-token words."""
    for n in range(0, 2 * engine.config.max_len):
        row = engine.prepare({"state": " ".join(["refund"] * n), "questions": {"q": question}}).rows[0]
        if len(row.ids) == length:
            return row
    raise AssertionError(f"premise: no state makes a row of {length} tokens for {question}")


SHORT_CHOICE = {"type": "choice", "instructions": "x", "criteria": ["a"]}


@pytest.mark.parametrize("length", [16, 17, 511, 512])
@pytest.mark.parametrize("n_rows", [1, 5, 16])
def test_bucket_edges(setup, n_rows, length):
    rows = [row_of_length(setup.reference, length, SHORT_CHOICE)] * n_rows
    for engine in (setup.graphs, setup.eager):
        assert_close_to_reference(setup, engine, rows)


def test_rows_with_fewer_options_than_the_widest(setup):
    questions = [NOUL, CHOICE, SHORT_CHOICE, SCORE]
    rows = [setup.reference.prepare({"state": "where is my parcel", "questions": {"q": q}}).rows[0] for q in questions]
    assert sorted(len(r.markers) for r in rows) == [1, 2, 4, 4]
    assert_close_to_reference(setup, setup.graphs, rows)


def single_token_labels(engine, n: int) -> list[str]:
    labels = []
    for token in range(engine.tokenizer._backend.get_vocab_size()):
        text = engine.tokenizer._backend.decode([token]).strip()
        if text.isalpha() and text not in labels and engine.tokenizer.encode(" " + text) == [token]:
            labels.append(text)
        if len(labels) == n:
            return labels
    raise AssertionError(f"premise: the tokenizer has {len(labels)} one-token labels, not {n}")


def test_2048_markers_over_16_questions(setup):
    labels = single_token_labels(setup.reference, 128)
    questions = {f"q{i}": {"type": "choice", "instructions": "pick", "criteria": labels} for i in range(16)}
    payload = {"state": "a long state " * 100, "questions": questions}
    rows = setup.reference.prepare(payload).rows
    assert sum(len(r.markers) for r in rows) == 2048
    assert_close_to_reference(setup, setup.graphs, rows)
    assert setup.graphs.decide(payload)["answers"].keys() == questions.keys()


def test_requests_answer_as_the_reference_does(setup):
    for request in REQUESTS:
        ours, want = setup.graphs.decide(request), setup.reference.decide(request)
        assert ours["usage"] == want["usage"] and ours["answers"].keys() == want["answers"].keys()
        rows = setup.reference.prepare(request).rows
        assert_close_to_reference(setup, setup.graphs, rows)


def test_protocol_0_4_requests_answer_as_the_reference_does(setup):
    from laya_common.contract import V04

    for request in REQUESTS04:
        ours, want = setup.graphs.decide(request, V04), setup.reference.decide(request, V04)
        assert ours["usage"] == want["usage"] and ours["answers"].keys() == want["answers"].keys()
        assert_close_to_reference(setup, setup.graphs, setup.reference.prepare(request, V04).rows)


def test_graphs_and_eager_give_the_same_answers(setup):
    for request in REQUESTS:
        assert setup.graphs.decide(request) == setup.eager.decide(request)


def test_a_replay_after_a_larger_shape_is_still_right(setup):
    small = setup.reference.prepare(REQUESTS[0]).rows
    large = setup.reference.prepare(REQUESTS[3]).rows
    first = setup.outputs(setup.graphs, small)
    setup.outputs(setup.graphs, large)
    again = setup.outputs(setup.graphs, small)
    np.testing.assert_array_equal(first.logits, again.logits)
    np.testing.assert_array_equal(first.act_probs, again.act_probs)
    assert_close_to_reference(setup, setup.graphs, small)


def test_two_passes_in_flight_answer_as_each_alone(setup):
    """The second pass's inputs are staged while the first runs, and its graph replays right after the first's
    readout: each must still read only its own inputs and land its own outputs (batch scoring's pipeline)."""
    from worker.engine.batch import Batch

    executor = setup.graphs.executor
    batches = [
        Batch.from_rows(setup.graphs.prepare(request).rows, setup.graphs.tokenizer.pad_id, executor.admits)
        for request in (REQUESTS[3], REQUESTS[0], REQUESTS[1])
    ]
    alone = [executor.forward(batch) for batch in batches]
    first, second = executor.launch(batches[0]), executor.launch(batches[1])
    got = [first.result()]
    third = executor.launch(batches[2])
    got += [second.result(), third.result()]
    for want, out in zip(alone, got, strict=True):
        np.testing.assert_array_equal(want.logits, out.logits)
        np.testing.assert_array_equal(want.act_probs, out.act_probs)


def test_original_rope_answers_as_the_reference_does(setup):
    from worker.engine.engine import Engine
    from worker.engine.executors import ExecutorOptions

    engine = Engine(setup.checkpoint, executor="cuda", options=ExecutorOptions(bundle=setup.bundle, original_rope=True))
    assert engine.executor.describe()["rope"] == "rope_table_bf16"
    for request in REQUESTS:
        assert_close_to_reference(setup, engine, setup.reference.prepare(request).rows)


def test_the_readout_kernels_answer_as_the_torch_readout(setup):
    from worker.engine.engine import Engine
    from worker.engine.executors import ExecutorOptions

    engine = Engine(setup.checkpoint, executor="cuda", options=ExecutorOptions(bundle=setup.bundle, torch_readout=True))
    assert (engine.executor.describe()["readout"], setup.graphs.executor.describe()["readout"]) == ("torch", "kernels")
    for request in REQUESTS:
        rows = setup.reference.prepare(request).rows
        ours, torch_ops = setup.outputs(setup.graphs, rows), setup.outputs(engine, rows)
        np.testing.assert_allclose(ours.logits, torch_ops.logits, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(ours.act_probs, torch_ops.act_probs, rtol=0, atol=1e-5)


def test_warmup_captures_the_common_buckets_and_reports_memory(setup):
    executor = setup.graphs.executor
    setup.graphs.warmup()
    memory = executor.describe()["memory"]
    cfg = setup.graphs.config
    encoder_gemm_bytes = 2 * cfg.num_layers * (4 * cfg.hidden_size + 3 * cfg.intermediate_size) * cfg.hidden_size
    assert memory["weights_mib"] * (1 << 20) > encoder_gemm_bytes
    # one row at every length, 2..16 rows at max_len, 16 rows at every other length
    assert memory["graphs"] >= 2 * (setup.graphs.config.max_len // 16) + 14
    assert memory["graphs_and_cublas_mib"] >= 0 and memory["workspaces_mib"] > 0


CUDA_ERROR_SCRIPT = """
import os
import sys
import numpy as np
from worker.engine.batch import Batch
from worker.engine.engine import Engine
from worker.engine.executors import ExecutorOptions
from laya_common.contract import ExecutorError
engine = Engine(sys.argv[1], executor="cuda", options=ExecutorOptions(bundle=sys.argv[2]))
payload = {"state": "refund", "questions": {"q": {"type": "noul", "instructions": "x"}}}
rows = engine.prepare(payload).rows
batch = Batch.from_rows(rows, engine.tokenizer.pad_id, engine.executor.admits)
embed = engine.executor.plan(batch.ids.shape)[0]._run  # the first launch: embed_norm, bound to the ids
embed._args = (8,) + embed._args[1:]  # ids at address 8: an illegal address, as a broken kernel would make
try:
    engine.executor.forward(batch)
except RuntimeError as e:
    print("first:", str(e).splitlines()[0], flush=True)
try:
    engine.decide(payload)
except ExecutorError as e:
    print("then:", str(e).splitlines()[0], flush=True)
os._exit(0)  # the context is broken for good: freeing its tensors at exit would abort the process
"""


def test_a_cuda_error_fails_the_executor_for_good(setup):
    """In a process of its own: an illegal address is sticky and would break every later test in this one."""
    done = subprocess.run(
        [sys.executable, "-c", CUDA_ERROR_SCRIPT, str(setup.checkpoint), str(setup.bundle)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, then = done.stdout.splitlines()[-2:]
    assert first.startswith("first:") and "CUDA" in first, done.stdout
    assert then.startswith("then:") and "failed earlier and answers nothing more" in then, done.stdout
