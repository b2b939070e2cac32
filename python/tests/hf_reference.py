"""The references the Python tests compare posenc with: Hugging Face's RoPE formulas written out in torch (as
transformers' Llama, GPT-NeoX and DeepSeek-V3 modeling code has them), the reference data in tests/data/, and the
rounding bounds the comparisons use."""
import json
import os

import numpy as np
import torch

SOURCE_DIR = os.environ.get("POSENC_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
U = 2.0 ** -24  # float32 unit roundoff

_reference = None


def reference():
    """tests/data/hf_rope_reference.json: numbers produced by running transformers' own RoPE code."""
    global _reference
    if _reference is None:
        with open(os.path.join(SOURCE_DIR, "tests", "data", "hf_rope_reference.json")) as f:
            _reference = json.load(f)
    return _reference


def config_json(name):
    """A reference config's input as the config.json a user would have (as tests/rope/hf_reference_test.cc)."""
    inp = reference()["configs"][name]["input_config"]
    c = dict(inp["attrs"])
    if c.get("hidden_size") == 7168:
        c["model_type"] = "deepseek_v3"  # its HF config class defaults rope_interleave to true
    c["rope_theta"] = inp["rope_theta"]
    if inp["rope_scaling"] is not None:
        c["rope_scaling"] = inp["rope_scaling"]
    if inp["partial_rotary_factor"] is not None:
        c["partial_rotary_factor"] = inp["partial_rotary_factor"]
    return c


# ---- transformers' formulas, written out in torch ------------------------------------------------------------

def rotate_half(x):
    """transformers `rotate_half`."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def hf_apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    """transformers `apply_rotary_pos_emb` (Llama), extended as GPT-NeoX's for cos narrower than head_dim: the
    first cos.shape[-1] channels are rotated, the rest concatenated back."""
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    rd = cos.shape[-1]

    def one(x):
        x_rot, x_pass = x[..., :rd], x[..., rd:]
        return torch.cat(((x_rot * cos) + (rotate_half(x_rot) * sin), x_pass), dim=-1)

    return one(q), one(k)


def deinterleave(x, rd):
    """DeepSeek-V3's `apply_rotary_pos_emb_interleave` view: channels (0, 2, 4, .., 1, 3, 5, ..) of [..., :rd]."""
    return torch.cat((x[..., 0:rd:2], x[..., 1:rd:2], x[..., rd:]), dim=-1)


def reinterleave(x, rd):
    """Inverse of deinterleave."""
    out = x.clone()
    half = rd // 2
    out[..., 0:rd:2] = x[..., :half]
    out[..., 1:rd:2] = x[..., half:rd]
    return out


def reference_rotation(q, k, cos, sin, unsqueeze_dim=1, layout="half-split"):
    """HF's formula for either layout: interleaved = de-interleave, rotate_half formula, re-interleave (what
    DeepSeek-V3's modeling code computes, returned in the input's channel order)."""
    if layout == "half-split":
        return hf_apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim)
    rd = cos.shape[-1]
    qe, ke = hf_apply_rotary_pos_emb(deinterleave(q, rd), deinterleave(k, rd), cos, sin, unsqueeze_dim)
    return reinterleave(qe, rd), reinterleave(ke, rd)


def hf_rotary_embedding(inv_freq, attention_scaling, position_ids, dtype=torch.float32):
    """transformers `LlamaRotaryEmbedding.forward` for a given inv_freq: float32 matmul, cat, cos/sin, scaling."""
    inv = torch.as_tensor(inv_freq, dtype=torch.float32)
    inv_expanded = inv[None, :, None].expand(position_ids.shape[0], -1, 1)
    pos_expanded = position_ids[:, None, :].float()
    freqs = (inv_expanded @ pos_expanded).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return (emb.cos() * attention_scaling).to(dtype), (emb.sin() * attention_scaling).to(dtype)


# ---- bounds ----------------------------------------------------------------------------------------------------

def pair_products(x, cos, sin, unsqueeze_dim=1, layout="half-split"):
    """|p1| + |p2| per output element of x's rotation, in float64: for output channel j of pair (a, b) with
    coefficients (c, s), p1 = its own element times c, p2 = its partner times s. Pass-through channels: 0."""
    x = x.double()
    c = cos.double().unsqueeze(unsqueeze_dim)
    s = sin.double().unsqueeze(unsqueeze_dim)
    rd = c.shape[-1]
    xr = (x if layout == "half-split" else deinterleave(x, rd))[..., :rd]
    mag = torch.cat((xr.abs() * c.abs() + rotate_half(xr).abs() * s.abs(), torch.zeros_like(x[..., rd:])), dim=-1)
    return mag if layout == "half-split" else reinterleave(mag, rd)


def float32_rotation_bound(products):
    """One float32 evaluation of a c - b s (or a c + b s), fused or not, against exact arithmetic on the same
    inputs: (2 + u) u (|p1| + |p2|) (two roundings of the products and one of the sum; see rope_kernels.h)."""
    return (2 + U) * U * products


def storage_ulp(x, dtype):
    """One unit in the last place of dtype at the magnitude of x (float64 tensor); normal numbers."""
    mantissa_bits = {torch.bfloat16: 8, torch.float16: 11, torch.float32: 24}[dtype]
    _, e = torch.frexp(x.abs().clamp_min(torch.finfo(dtype).tiny))
    return torch.ldexp(torch.ones_like(x), (e - mantissa_bits).to(torch.int32))


def storage_bound(exact, products, dtype):
    """posenc's result in `dtype` storage against the exact rotation of the stored inputs: the float32 bound, then
    one rounding to dtype of a value within that bound of exact (half an ulp at |exact| + bound)."""
    e32 = float32_rotation_bound(products)
    if dtype == torch.float32:
        return e32
    return 0.5 * storage_ulp(exact.abs() + e32, dtype) + e32


def within_hf_float32_bound(ours, ref, inv_ours, inv_hf, attention_scaling, positions):
    """posenc's 'hf' cos/sin (`ours`, [n, rotary_dim]) against HF's float32 values (`ref`): the same float32 angle
    up to inv_freq's difference, so |d| <= pos |inv - inv_hf| att + ulp(fl32(inv pos)) att (the angle's own
    rounding) + 2 ulp(ref) (both cos implementations within 1 ulp of correctly rounded). inv_* are [rotary_dim/2].
    Returns (ok, worst error)."""
    inv = np.tile(np.asarray(inv_ours, np.float32), 2)
    inv_hf = np.tile(np.asarray(inv_hf, np.float64), 2)
    pos = np.asarray(positions, np.float64)[:, None]
    angle32 = inv[None, :] * np.asarray(positions, np.float32)[:, None]
    shift = pos * np.abs(inv.astype(np.float64) - inv_hf) * attention_scaling + ulp32(angle32) * attention_scaling
    ref = np.asarray(ref, np.float32)
    err = np.abs(np.asarray(ours, np.float64) - ref)
    return bool(np.all(err <= shift + 2 * ulp32(ref))), float(err.max())


def ulp32(x):
    """float32 ulp at the magnitude of x (numpy float32 array or scalar), as float64."""
    a = np.abs(np.asarray(x, dtype=np.float32))
    return (np.nextafter(a, np.float32(np.inf)) - a).astype(np.float64)


def random_tensor(shape, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)
