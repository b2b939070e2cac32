"""RopeConfig and Frequencies against the Hugging Face reference data: rotary_dim, inv_freq within 1 ulp of HF's
float32 values, attention factor equal, the DeepSeek softmax-scale multiplier; every way to build a config; errors
that name the field."""
import json
import os

import numpy as np
import pytest

import posenc
from hf_reference import SOURCE_DIR, config_json, reference, ulp32

CONFIG_NAMES = sorted(reference()["configs"])


def float32_runs(name):
    return [r for r in reference()["configs"][name]["runs"] if r["precision"] == "float32"]


@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_rotary_dim_inv_freq_and_attention_factor_match_hf(name):
    cfg = posenc.RopeConfig.from_hf(config_json(name))
    assert cfg.rotary_dim == reference()["configs"][name]["rotary_dim"]
    assert cfg.rope_type == reference()["configs"][name]["rope_type"]
    for run in float32_runs(name):
        f = cfg.frequencies(run["seq_len"])
        expected = np.asarray(run["inv_freq"], dtype=np.float32)
        assert f.inv_freq.dtype == np.float32 and f.inv_freq.shape == (cfg.rotary_dim // 2,)
        # 1 ulp: posenc's pow is correctly rounded, torch's vectorised float32 pow is within 1 ulp
        assert np.all(np.abs(f.inv_freq.astype(np.float64) - expected) <= ulp32(expected)), run["label"]
        assert f.attention_factor == run["attention_scaling"]
        assert f.rotary_dim == cfg.rotary_dim


@pytest.mark.parametrize("name", ["dynamic-ntk-2-llama2dims", "phi-3-mini-128k-instruct"])
def test_init_table_is_hf_init_and_seq_len_tables_are_hf_direct_calls(name):
    # RopeConfig.inv_freq is HF's init table (dynamic: the base table; longrope: the short factors);
    # frequencies(seq_len) is HF's init function called with that seq_len
    cfg = posenc.RopeConfig.from_hf(config_json(name))
    for run in float32_runs(name):
        at_init = np.asarray(run["inv_freq_at_init"], dtype=np.float32)
        assert np.all(np.abs(cfg.inv_freq.astype(np.float64) - at_init) <= ulp32(at_init))
        direct = run["direct_init_fn_int_seq_len"]
        expected = np.asarray(direct["inv_freq"], dtype=np.float32)
        f = cfg.frequencies(run["seq_len"])
        assert np.all(np.abs(f.inv_freq.astype(np.float64) - expected) <= ulp32(expected)), run["label"]
        assert f.attention_factor == direct["attention_scaling"]


def test_deepseek_softmax_scale_multiplier_and_layout():
    cfg = posenc.RopeConfig.from_hf(config_json("deepseek-v3"))
    example = next(e for e in reference()["apply_rotary_examples"] if e["config"] == "deepseek-v3")
    assert cfg.softmax_scale_multiplier == pytest.approx(
        example["cases"][0]["softmax_scale_multiplier_mscale_all_dim_squared"], rel=2 ** -52 * 4)
    assert cfg.layout == "interleaved"
    assert posenc.RopeConfig.from_hf(config_json("llama3.1-8b")).layout == "half-split"


def test_from_path_dict_json_text_object_and_config_agree(tmp_path):
    path = os.path.join(SOURCE_DIR, "examples", "configs", "qwen2.5-7b-instruct-yarn4.json")
    with open(path) as f:
        d = json.load(f)

    class PretrainedConfigLike:  # what transformers' PretrainedConfig offers: to_dict()
        def to_dict(self):
            return dict(d)

    from_path = posenc.RopeConfig.from_hf(path)
    import pathlib
    variants = [posenc.RopeConfig.from_hf(pathlib.Path(path)), posenc.RopeConfig.from_hf(d),
                posenc.RopeConfig.from_json(json.dumps(d)), posenc.RopeConfig.from_hf(PretrainedConfigLike()),
                posenc.RopeConfig.from_hf(from_path)]
    for v in variants:
        assert (v.rope_type, v.rotary_dim, v.head_dim, v.layout) == ("yarn", 128, 128, "half-split")
        np.testing.assert_array_equal(v.inv_freq, from_path.inv_freq)
        assert v.attention_factor == from_path.attention_factor
    assert from_path.factor == 4.0 and from_path.original_max_position_embeddings == 32768
    assert "yarn" in repr(from_path)


def test_errors_name_the_field_and_value():
    with pytest.raises(posenc.ConfigError, match="factor") as e:
        posenc.RopeConfig.from_hf({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": -2.0}})
    assert isinstance(e.value, ValueError) and isinstance(e.value, posenc.Error)
    with pytest.raises(posenc.ConfigError, match="head_dim"):
        posenc.RopeConfig.from_hf({"rope_theta": 10000.0})
    with pytest.raises(posenc.ConfigError, match="'nope'"):
        posenc.RopeConfig.from_hf({"head_dim": 64, "rope_scaling": {"rope_type": "nope"}})
    with pytest.raises(posenc.ConfigError, match="not valid JSON"):
        posenc.RopeConfig.from_json("{head_dim: 64")
    with pytest.raises(posenc.IoError) as e:
        posenc.RopeConfig.from_hf("/nonexistent/config.json")
    assert isinstance(e.value, OSError)
    with pytest.raises(TypeError, match="config must be"):
        posenc.RopeConfig.from_hf(42)
    cfg = posenc.RopeConfig.from_hf(config_json("dynamic-ntk-2-llama2dims"))
    with pytest.raises(ValueError, match="seq_len"):
        cfg.frequencies(0)


def test_hf_dynamic_state_reproduces_hf_stateful_trace():
    trace = reference()["dynamic_stateful_trace"]
    state = posenc.HfDynamicRopeState(posenc.RopeConfig.from_hf(config_json(trace["config"])))
    steps = [s for s in trace["steps"] if s["precision"] == "float32"]
    assert len(steps) == 7
    for step in steps:
        f = state.update(step["seq_len"])
        assert state.max_seq_len_cached == step["max_seq_len_cached_after"], step["seq_len"]
        expected = np.asarray(step["inv_freq_after"], dtype=np.float32)
        assert np.all(np.abs(f.inv_freq.astype(np.float64) - expected) <= ulp32(expected)), step["seq_len"]
        np.testing.assert_array_equal(state.frequencies.inv_freq, f.inv_freq)
    with pytest.raises(posenc.ConfigError, match="dynamic or longrope"):
        posenc.HfDynamicRopeState(posenc.RopeConfig.from_hf(config_json("llama2-7b")))
