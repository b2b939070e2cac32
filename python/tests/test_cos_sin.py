"""posenc.cos_sin against the Hugging Face reference tables: shapes like HF's (cat(freqs, freqs), attention factor
folded in), 'hf' precision against HF's float32 cos/sin and 'exact' against HF's float64 run, within the bounds
the C++ tests derive (tests/rope/hf_reference_test.cc)."""
import numpy as np
import pytest
import torch

import posenc
from hf_reference import config_json, reference, ulp32, within_hf_float32_bound

CONFIG_NAMES = sorted(reference()["configs"])


def runs(name, precision):
    return [r for r in reference()["configs"][name]["runs"] if r["precision"] == precision]


@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_hf_precision_within_angle_shift_plus_two_ulp_of_hf_float32(name):
    cfg = posenc.RopeConfig.from_hf(config_json(name))
    for run in runs(name, "float32"):
        cos, sin = posenc.cos_sin(cfg, run["positions"], precision="hf", seq_len=run["seq_len"])
        assert cos.shape == (len(run["positions"]), cfg.rotary_dim) and cos.dtype == np.float32
        inv = cfg.frequencies(run["seq_len"]).inv_freq
        for ours, ref in ((cos, run["cos"]), (sin, run["sin"])):
            ok, worst = within_hf_float32_bound(ours, ref, inv, run["inv_freq"], run["attention_scaling"],
                                                run["positions"])
            assert ok, (run["label"], worst)


@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_exact_precision_within_derived_bound_of_hf_float64(name):
    # exact: cos(inv32 * pos) within 1 ulp; HF float64 uses inv64: |d| <= pos |inv32 - inv64| att + ulp(ours)
    # + |angle| 2^-52 att.
    cfg = posenc.RopeConfig.from_hf(config_json(name))
    for run in runs(name, "float64"):
        positions = np.asarray(run["positions"], dtype=np.int64)
        cos, sin = posenc.cos_sin(cfg, positions, precision="exact", seq_len=run["seq_len"])
        inv32 = np.tile(cfg.frequencies(run["seq_len"]).inv_freq, 2).astype(np.float64)
        inv64 = np.tile(np.asarray(run["inv_freq"], dtype=np.float64), 2)
        att = run["attention_scaling"]
        pos = positions[:, None].astype(np.float64)
        for ours, ref in ((cos, np.asarray(run["cos"])), (sin, np.asarray(run["sin"]))):
            bound = pos * np.abs(inv32 - inv64) * att + ulp32(ours) + np.abs(pos * inv64) * 2.0 ** -52 * att
            assert np.all(np.abs(ours.astype(np.float64) - ref) <= bound), run["label"]


def test_shapes_inputs_and_halves():
    cfg = posenc.RopeConfig.from_hf(config_json("llama3.1-8b"))
    ids2 = np.array([[0, 1, 2], [5, 6, 7]], dtype=np.int64)
    cos, sin = posenc.cos_sin(cfg, ids2)
    assert cos.shape == sin.shape == (2, 3, 128)
    np.testing.assert_array_equal(cos[..., :64], cos[..., 64:])  # cat(freqs, freqs)
    np.testing.assert_array_equal(sin[..., :64], sin[..., 64:])
    for ids in (torch.tensor(ids2), ids2.astype(np.int32), ids2.tolist(), np.asfortranarray(ids2)):
        c, s = posenc.cos_sin(cfg, ids)
        np.testing.assert_array_equal(c, cos)
        np.testing.assert_array_equal(s, sin)
    c1, _ = posenc.cos_sin(cfg, [7])
    np.testing.assert_array_equal(c1[0], cos[1, 2])
    assert posenc.cos_sin(cfg, 3)[0].shape == (128,)
    # position 0: cos = attention factor, sin = 0
    yarn = posenc.RopeConfig.from_hf(config_json("qwen2.5-7b-instruct-yarn4"))
    c0, s0 = posenc.cos_sin(yarn, [0])
    np.testing.assert_array_equal(c0, np.float32(yarn.attention_factor))
    np.testing.assert_array_equal(s0, 0.0)


def test_seq_len_default_is_max_position_plus_one_for_dynamic():
    cfg = posenc.RopeConfig.from_hf(config_json("dynamic-ntk-2-llama2dims"))
    ids = np.arange(6000)[None]
    a, _ = posenc.cos_sin(cfg, ids)
    b, _ = posenc.cos_sin(cfg, ids, seq_len=6000)
    c, _ = posenc.cos_sin(cfg.frequencies(6000), ids)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    d, _ = posenc.cos_sin(cfg, ids, seq_len=4096)  # the base table differs
    assert not np.array_equal(a, d)


def test_errors():
    cfg = posenc.RopeConfig.from_hf(config_json("llama2-7b"))
    with pytest.raises(ValueError, match="precision"):
        posenc.cos_sin(cfg, [0], precision="fast")
    with pytest.raises(TypeError, match="position_ids must be int64 or int32"):
        posenc.cos_sin(cfg, np.zeros(3, np.float32))
    with pytest.raises(posenc.RangeError, match="position"):
        posenc.cos_sin(cfg, [2 ** 41])
    with pytest.raises(ValueError, match="seq_len applies to a RopeConfig"):
        posenc.cos_sin(cfg.frequencies(), [0], seq_len=5)
    with pytest.raises(TypeError, match="config must be"):
        posenc.cos_sin({"head_dim": 8}, [0])
