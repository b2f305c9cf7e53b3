import json

import pytest

from laya_common.model import GLOBAL, LOCAL, ModelConfig, clamp_temperature, temperature_bucket


def test_tiny_alt_reads_depth_period_window_and_thetas_from_the_files(tiny_alt_checkpoint):
    cfg = ModelConfig.from_checkpoint(tiny_alt_checkpoint)
    assert cfg.layer_types == (GLOBAL, LOCAL, GLOBAL)
    assert cfg.global_every == 2
    assert (cfg.window, cfg.global_theta, cfg.local_theta) == (32, 80000.0, 5000.0)
    assert (cfg.head_dim, cfg.head_heads, cfg.n_act) == (64, 2, 2)


def test_transformers5_layout_with_layer_types_and_rope_parameters():
    enc = {
        "vocab_size": 10,
        "hidden_size": 128,
        "intermediate_size": 8,
        "num_hidden_layers": 3,
        "num_attention_heads": 2,
        "layer_types": [LOCAL, GLOBAL, LOCAL],
        "rope_parameters": {GLOBAL: {"rope_theta": 1.0e6}, LOCAL: {"rope_theta": 123.0}},
    }
    cfg = ModelConfig.from_dicts(enc, {"max_len": 256, "head_max_len": 64})
    assert cfg.layer_types == (LOCAL, GLOBAL, LOCAL) and cfg.global_every is None
    assert (cfg.global_theta, cfg.local_theta, cfg.max_len, cfg.head_max_len) == (1.0e6, 123.0, 256, 64)


@pytest.mark.parametrize(
    ("raw", "applied"), [(0.1006, 0.5), (7.5, 5.0), ("n/a", 1.0), (float("nan"), 1.0), (None, 1.0), (1.25, 1.25)]
)
def test_temperatures_are_clamped_like_the_reference(raw, applied):
    assert clamp_temperature(raw) == applied


def test_temperature_buckets():
    assert [temperature_bucket(0, k) for k in (1, 2, 3, 5, 6, 10, 11)] == [
        "choice:2",
        "choice:2",
        "choice:3-5",
        "choice:3-5",
        "choice:6-10",
        "choice:6-10",
        "choice:11+",
    ]


def test_a_missing_or_broken_config_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="encoder/config.json"):
        ModelConfig.from_checkpoint(tmp_path)
    (tmp_path / "encoder").mkdir()
    (tmp_path / "encoder/config.json").write_text("{nope")
    (tmp_path / "rl_agent_config.json").write_text(json.dumps({}))
    with pytest.raises(ValueError, match="encoder/config.json"):
        ModelConfig.from_checkpoint(tmp_path)
