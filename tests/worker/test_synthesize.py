"""Synthesized checkpoints: deterministic, complete, loadable by laya 0.3.20, and not trivially uniform."""

from __future__ import annotations

import json
import warnings

import pytest

from laya_common.model import ModelConfig
from worker.commands.synthesize import synthesize

ARTIFACTS = (  # DESIGN.md "Bundle and checkpoint": the five checkpoint artifacts
    "rl_agent_config.json",
    "model.safetensors",
    "encoder/config.json",
    "tokenizer/tokenizer.json",
    "tokenizer/tokenizer_config.json",
)
NOT_UNIFORM = 0.05  # max - min probability over 4 options that shows the options are told apart


@pytest.fixture(scope="module")
def tiny(tiny_checkpoint):
    return tiny_checkpoint  # tests/worker/conftest.py: synthesize(..., size="tiny", seed=0)


@pytest.fixture(scope="module")
def agent(tiny):
    import laya

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="laya: this checkpoint ships invalid temperatures")
        return laya.Agent(str(tiny), device="cpu")


def test_the_five_artifacts_exist(tiny):
    for name in ARTIFACTS:
        assert (tiny / name).is_file(), f"{name} is missing"
        assert (tiny / name).stat().st_size > 0, f"{name} is empty"


def test_same_seed_gives_the_same_bytes(tiny, tmp_path):
    again = synthesize(tmp_path / "again", size="tiny", seed=0)
    for name in ARTIFACTS:
        assert (again / name).read_bytes() == (tiny / name).read_bytes(), f"{name} differs for the same seed"


def test_another_seed_gives_other_weights(tiny, tmp_path):
    from safetensors.torch import load_file

    other = synthesize(tmp_path / "other", size="tiny", seed=1)
    a, b = load_file(str(tiny / "model.safetensors")), load_file(str(other / "model.safetensors"))
    assert a.keys() == b.keys()
    same = [k for k in a if k != "temperature" and a[k].equal(b[k])]
    assert not same, f"tensors identical across seeds: {same[:5]}"


@pytest.mark.parametrize(("size", "layers", "every"), [("tiny", 4, 3), ("tiny-alt", 3, 2)])
def test_presets_have_their_depth_and_attention_period(tmp_path, size, layers, every):
    out = synthesize(tmp_path / size, size=size, seed=0)
    enc = json.loads((out / "encoder/config.json").read_text())
    assert (enc["num_hidden_layers"], enc["global_attn_every_n_layers"], enc["hidden_size"]) == (layers, every, 128)


@pytest.mark.parametrize("size", ["tiny-alt", "tiny-typed"])
def test_a_presets_configuration_is_the_one_its_checkpoint_carries(tiny, tmp_path, size):
    """What `laya-bundle build --model NAME` compiles for is what `synthesize --size NAME` writes."""
    assert ModelConfig.from_preset("tiny") == ModelConfig.from_checkpoint(tiny)
    out = synthesize(tmp_path / size, size=size, seed=0)
    assert ModelConfig.from_preset(size) == ModelConfig.from_checkpoint(out) != ModelConfig.from_preset("tiny")


def test_the_config_ships_temperatures_laya_must_clamp(tiny):
    """Out-of-range and non-number temperatures, so decoding exercises every clamping rule."""
    import laya

    with pytest.warns(RuntimeWarning, match="invalid temperatures or values outside"):
        laya.Agent(str(tiny), device="cpu")
    agent_cfg = json.loads((tiny / "rl_agent_config.json").read_text())
    by_options = list(agent_cfg["temperature_by_options"].values())
    assert any(isinstance(t, (int, float)) and not 0.5 <= t <= 5.0 for t in by_options)
    assert any(not isinstance(t, (int, float)) for t in by_options)


def test_laya_loads_it_strictly(tiny, agent):
    """laya loads with strict=True after its own compatibility check; every tensor maps onto its model both ways."""
    from safetensors.torch import load_file

    weights = load_file(str(tiny / "model.safetensors"))
    model_keys = set(agent.model.state_dict())
    assert set(weights) == model_keys
    for name, tensor in agent.model.state_dict().items():
        assert tuple(weights[name].shape) == tuple(tensor.shape), name
    assert agent.model.encoder.config.num_hidden_layers == 4


def test_answers_are_not_uniform(agent):
    questions = {
        f"q{i}": {"type": "choice", "instructions": instr, "criteria": ["refund", "bug report", "price", "other"]}
        for i, instr in enumerate(["What does the customer want?", "Topic?", "Which team handles this?"])
    }
    result = agent.predict("My card was charged twice for one order, please refund me.", questions)
    spreads = [max(a["probabilities"].values()) - min(a["probabilities"].values()) for a in result["answers"].values()]
    assert max(spreads) > NOT_UNIFORM, f"options are scored alike: spreads {spreads}"


def test_answers_depend_on_the_state(agent):
    question = {"q": {"type": "noul", "instructions": "Is the customer angry?"}}
    a = agent.predict("Thanks, everything arrived fine and early.", question)["answers"]["q"]["noul"]
    b = agent.predict("This is the third broken package, I want my money back NOW.", question)["answers"]["q"]["noul"]
    assert a != b
