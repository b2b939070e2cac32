"""The README's patch of a transformers Llama model, applied to a tiny hand-written module with the same structure
(transformers is not a dependency): attention layers call the module-level `apply_rotary_pos_emb` by name, the
model computes (cos, sin) once with its `rotary_emb`. Both are replaced by posenc.torch's; the patched model's
rotated q/k and its output must match the original's within bounds derived from the RoPE differences alone (the
layers compute attention and the output projection in float64, so nothing else rounds differently)."""
import math
import types

import torch

import posenc.torch
from hf_reference import U, pair_products, random_tensor, rotate_half


class TinyConfig:  # the attributes a transformers ModelConfig has, and to_dict()
    hidden_size = 64
    num_attention_heads = 4
    num_key_value_heads = 2
    head_dim = 16
    max_position_embeddings = 256
    rope_theta = 10000.0
    rope_scaling = {"rope_type": "linear", "factor": 2.0}

    def to_dict(self):
        return {k: getattr(self, k) for k in ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                                              "max_position_embeddings", "rope_theta", "rope_scaling")}


def make_modeling():
    """A stand-in for transformers.models.llama.modeling_llama: module-level functions looked up at call time."""
    m = types.ModuleType("tiny_modeling_llama")

    def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)

    class RotaryEmbedding(torch.nn.Module):  # LlamaRotaryEmbedding with linear scaling
        def __init__(self, config):
            super().__init__()
            dim = config.head_dim
            inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
            self.register_buffer("inv_freq", inv_freq / config.rope_scaling["factor"], persistent=False)
            self.attention_scaling = 1.0

        @torch.no_grad()
        def forward(self, x, position_ids):
            inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
            freqs = (inv @ position_ids[:, None, :].float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            return (emb.cos() * self.attention_scaling).to(x.dtype), (emb.sin() * self.attention_scaling).to(x.dtype)

    class Attention(torch.nn.Module):
        def __init__(self, config):
            super().__init__()
            self.h, self.kvh, self.d = config.num_attention_heads, config.num_key_value_heads, config.head_dim
            self.q_proj = torch.nn.Linear(config.hidden_size, self.h * self.d, bias=False)
            self.k_proj = torch.nn.Linear(config.hidden_size, self.kvh * self.d, bias=False)
            self.v_proj = torch.nn.Linear(config.hidden_size, self.kvh * self.d, bias=False)
            self.o_proj = torch.nn.Linear(self.h * self.d, config.hidden_size, bias=False)

        def forward(self, hidden, position_embeddings):
            b, s, _ = hidden.shape
            q = self.q_proj(hidden).view(b, s, self.h, self.d).transpose(1, 2)
            k = self.k_proj(hidden).view(b, s, self.kvh, self.d).transpose(1, 2)
            v = self.v_proj(hidden).view(b, s, self.kvh, self.d).transpose(1, 2)
            cos, sin = position_embeddings
            q, k = m.apply_rotary_pos_emb(q, k, cos, sin)  # by name, as transformers' layers do
            self.last = (q, k, v)
            rep = self.h // self.kvh
            kd, vd = k.double().repeat_interleave(rep, 1), v.double().repeat_interleave(rep, 1)
            scores = q.double() @ kd.transpose(2, 3) / math.sqrt(self.d)
            scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
            self.probs = scores.softmax(-1)
            out = (self.probs @ vd).transpose(1, 2).reshape(b, s, self.h * self.d)
            return out @ self.o_proj.weight.double().t()

    class Model(torch.nn.Module):
        def __init__(self, config):
            super().__init__()
            self.rotary_emb = RotaryEmbedding(config)
            self.layer = Attention(config)

        def forward(self, hidden, position_ids):
            return self.layer(hidden, self.rotary_emb(hidden, position_ids))

    m.apply_rotary_pos_emb, m.RotaryEmbedding, m.Attention, m.Model = (apply_rotary_pos_emb, RotaryEmbedding,
                                                                      Attention, Model)
    return m


def test_patched_model_matches_original_within_rope_bounds():
    config = TinyConfig()
    torch.manual_seed(0)
    original_modeling, patched_modeling = make_modeling(), make_modeling()
    original = original_modeling.Model(config)
    patched = patched_modeling.Model(config)
    patched.load_state_dict(original.state_dict())

    # the README's two lines, on the stand-in module
    patched_modeling.apply_rotary_pos_emb = posenc.torch.apply_rotary_pos_emb
    patched.rotary_emb = posenc.torch.RotaryEmbedding(config)

    hidden = random_tensor((2, 12, 64), 1)
    position_ids = torch.arange(12)[None].repeat(2, 1) + torch.tensor([[0], [100]])
    out_o = original(hidden, position_ids)
    h_p = hidden.clone().requires_grad_()
    out_p = patched(h_p, position_ids)
    assert "ApplyRotary" in type(patched.layer.last[0].grad_fn).__name__  # posenc's autograd Function ran

    # cos/sin: posenc's inv_freq within 1 ulp of torch's (|d inv| <= 2^-23 inv), same float32 angle otherwise:
    # |d cos| <= pos |d inv| + ulp(angle) + 2 ulp(cos) (two cos implementations within 1 ulp)
    cos_o, sin_o = original.rotary_emb(hidden, position_ids)
    cos_p, sin_p = patched.rotary_emb(hidden, position_ids)
    inv = torch.cat((original.rotary_emb.inv_freq,) * 2).double()
    pos = position_ids[..., None].double()
    angle_ulp = torch.nextafter((pos * inv).float(), torch.tensor(math.inf)).double() - (pos * inv).float().double()
    for p, o in ((cos_p, cos_o), (sin_p, sin_o)):
        ulp = torch.nextafter(o.abs(), torch.tensor(math.inf)).double() - o.abs().double()
        bound = pos * inv * 2.0 ** -23 + angle_ulp + 2 * ulp
        assert bool(((p.double() - o.double()).abs() <= bound).all())
    d_cos = (cos_p.double() - cos_o.double()).abs()
    d_sin = (sin_p.double() - sin_o.double()).abs()

    # rotated q/k: the rotation bound plus the cos/sin differences times the inputs
    q_o, k_o, v_o = original.layer.last
    q_p, k_p, _ = patched.layer.last
    deltas = []
    for got, want, x_name in ((q_p, q_o, "q"), (k_p, k_o, "k")):
        pre = getattr(original.layer, x_name + "_proj")(hidden)
        pre = pre.view(2, 12, -1, 16).transpose(1, 2).detach()
        delta = (2 * (2 + U) * U * pair_products(pre, cos_o, sin_o)
                 + pre.double().abs() * d_cos[:, None] + rotate_half(pre.double()).abs() * d_sin[:, None])
        assert bool(((got.detach().double() - want.detach().double()).abs() <= delta).all())
        deltas.append(delta)

    # output: scores move by at most ds = scale sum_d (|q| dk + dq |k| + dq dk); a row's softmax then moves by at
    # most exp(2 max ds) - 1 in l1, so each attention output by that times max |v|, then through |o_proj|.
    dq, dk = deltas
    rep = 2
    qa, ka = q_o.detach().double().abs(), k_o.detach().double().abs().repeat_interleave(rep, 1)
    dk = dk.repeat_interleave(rep, 1)
    ds = (qa @ dk.transpose(2, 3) + dq @ ka.transpose(2, 3) + dq @ dk.transpose(2, 3)) / math.sqrt(16)
    ds = ds.masked_fill(torch.ones(12, 12, dtype=torch.bool).triu(1), 0.0)
    l1 = torch.expm1(2 * ds.amax(-1))  # [b, h, s]
    vmax = v_o.detach().double().abs().max()
    d_attn = (l1 * vmax).transpose(1, 2).repeat_interleave(16, -1)  # [b, s, h * d]
    bound = d_attn @ original.layer.o_proj.weight.double().abs().t() + 1e-12
    assert bool(((out_p.detach() - out_o.detach()).abs() <= bound).all())

    # backward runs through posenc's Function into every parameter and the input
    out_p.sum().backward()
    for name, param in patched.named_parameters():
        assert param.grad is not None and bool(torch.isfinite(param.grad).all()), name
    assert h_p.grad is not None and bool(torch.isfinite(h_p.grad).all())


def test_patched_model_runs_in_bfloat16():  # (torch 1.13 has no float16 Linear on the CPU)
    dtype = torch.bfloat16
    config = TinyConfig()
    modeling = make_modeling()
    model = modeling.Model(config).to(dtype)
    modeling.apply_rotary_pos_emb = posenc.torch.apply_rotary_pos_emb
    model.rotary_emb = posenc.torch.RotaryEmbedding(config)
    hidden = random_tensor((1, 6, 64), 2, dtype)
    cos, sin = model.rotary_emb(hidden, torch.arange(6)[None])
    assert cos.dtype == dtype
    out = model(hidden, torch.arange(6)[None])
    assert model.layer.last[0].dtype == dtype and bool(torch.isfinite(out).all())
