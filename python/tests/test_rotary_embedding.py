"""posenc.torch.RotaryEmbedding against Hugging Face's LlamaRotaryEmbedding: the reference data's cos/sin tables
(HF's module run on 9 real configs, every rope type) and HF's stateful dynamic-NTK trace, plus the module
contract (shapes, dtype, device, buffers)."""
import numpy as np
import pytest
import torch

import posenc
import posenc.torch as pt
from hf_reference import config_json, hf_rotary_embedding, reference, ulp32, within_hf_float32_bound

CONFIG_NAMES = sorted(reference()["configs"])


@pytest.mark.parametrize("name", CONFIG_NAMES)
def test_module_cos_sin_match_hf_float32_tables(name):
    # A fresh module per run (the reference ran one per seq_len); the bound of posenc.cos_sin's 'hf' test.
    for run in (r for r in reference()["configs"][name]["runs"] if r["precision"] == "float32"):
        module = pt.RotaryEmbedding(config_json(name))
        positions = torch.tensor([run["positions"]])
        cos, sin = module(torch.zeros(1, 1, len(run["positions"]), 8), positions)
        rd = reference()["configs"][name]["rotary_dim"]
        assert cos.shape == (1, len(run["positions"]), rd) and cos.dtype == torch.float32
        assert module.attention_scaling == run["attention_scaling"]
        for ours, ref in ((cos[0], run["cos"]), (sin[0], run["sin"])):
            ok, worst = within_hf_float32_bound(ours.numpy(), ref, module.inv_freq.numpy(), run["inv_freq"],
                                                run["attention_scaling"], run["positions"])
            assert ok, (run["label"], worst)


def test_dynamic_module_follows_hf_stateful_trace():
    trace = reference()["dynamic_stateful_trace"]
    module = pt.RotaryEmbedding(config_json(trace["config"]))
    x = torch.zeros(1, 1, 1, 8)
    for step in (s for s in trace["steps"] if s["precision"] == "float32"):
        cos, sin = module(x, torch.tensor([[step["seq_len"] - 1]]))
        assert module.max_seq_len_cached == step["max_seq_len_cached_after"], step["seq_len"]
        expected = np.asarray(step["inv_freq_after"], np.float32)
        inv = module.inv_freq.numpy()
        assert np.all(np.abs(inv.astype(np.float64) - expected) <= ulp32(expected)), step["seq_len"]
        for ours, ref in ((cos[0], step["cos_at_last_position"]), (sin[0], step["sin_at_last_position"])):
            ok, worst = within_hf_float32_bound(ours.numpy(), [ref], inv, expected, 1.0, [step["seq_len"] - 1])
            assert ok, (step["seq_len"], worst)


@pytest.mark.parametrize("name", ["llama3.1-8b", "qwen2.5-7b-instruct-yarn4", "linear-8-llama2dims"])
def test_matches_hf_module_formula_in_torch(name):
    # HF's forward written out in torch (float32 matmul, cat, cos/sin, scaling) with the same inv_freq: the same
    # float32 angles, so the unscaled values are within 2 ulp (two cos/sin implementations within 1 ulp each);
    # both then multiply by fl32(attention_scaling) = a and round: |d| <= 2 a ulp(value / a) + ulp(value).
    module = pt.RotaryEmbedding(config_json(name))
    position_ids = torch.tensor([[0, 1, 2, 77, 4095, 31999], [3, 4, 5, 6, 7, 8]])
    cos, sin = module(torch.zeros(2, 1, 6, 4), position_ids)
    ref_cos, ref_sin = hf_rotary_embedding(module.inv_freq, module.attention_scaling, position_ids)
    a = float(np.float32(module.attention_scaling))
    for ours, ref in ((cos, ref_cos), (sin, ref_sin)):
        r = ref.numpy()
        bound = 2 * a * ulp32(r / np.float32(a)) + (ulp32(r) if a != 1.0 else 0.0)
        assert np.all(np.abs(ours.double().numpy() - r.astype(np.float64)) <= bound)


def test_dtype_device_batch_and_buffers():
    module = pt.RotaryEmbedding(posenc.RopeConfig.from_hf(config_json("llama2-7b")))
    assert isinstance(module, torch.nn.Module)
    assert module.inv_freq.dtype == torch.float32 and module.inv_freq.shape == (64,)
    assert "inv_freq" not in module.state_dict()  # non-persistent, as HF's
    x = torch.zeros(3, 5, 128, dtype=torch.bfloat16)
    position_ids = torch.arange(5)[None].expand(3, 5)
    cos, sin = module(x, position_ids)
    assert cos.shape == (3, 5, 128) and cos.dtype == torch.bfloat16 and sin.device == x.device
    c32, _ = module(x.float(), position_ids)
    assert torch.equal(cos, c32.bfloat16())  # computed in float32, then cast (as HF)
    longrope = pt.RotaryEmbedding(config_json("phi-3-mini-128k-instruct"))
    short = longrope.inv_freq.clone()
    longrope(x, torch.tensor([[8191]]))
    assert not torch.equal(longrope.inv_freq, short)  # long factors past original_max_position_embeddings
    longrope(x, torch.tensor([[10]]))
    assert torch.equal(longrope.inv_freq, short)
