"""Drop-in replacements for Hugging Face transformers' rotary code, on posenc's kernels.

    import posenc.torch
    from transformers.models.llama import modeling_llama
    modeling_llama.apply_rotary_pos_emb = posenc.torch.apply_rotary_pos_emb   # attention layers call it by name
    model.model.rotary_emb = posenc.torch.RotaryEmbedding(model.config)     # cos/sin for every rope type

apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1) has HF's signature and computes what HF's
computes -- new tensors q * cos + rotate_half(q) * sin and the same for k, in the promoted dtype; bfloat16/float16
rounded once from float32, not after each product as HF's eager code, see the function -- through a
torch.autograd.Function whose backward is the transposed rotation (and HF's formula for cos/sin gradients, when
they require grad). CPU tensors of float32, bfloat16 and float16; anything else raises TypeError.

RotaryEmbedding(config) is an nn.Module whose forward(x, position_ids) returns (cos, sin) of shape [batch, seq,
rotary_dim] in x's dtype, like LlamaRotaryEmbedding, for every rope type posenc supports, with HF's float32 angle
(`precision='hf'`) and, for dynamic and longrope, HF's stateful update (the table grows with the longest sequence
seen and resets below max_position_embeddings).
"""
import torch as _torch
from torch.autograd.function import once_differentiable as _once_differentiable

from . import HfDynamicRopeState, RopeConfig, _posenc, cos_sin

__all__ = ["RotaryEmbedding", "apply_rotary_pos_emb"]

_LAYOUTS = {"half-split": 0, "interleaved": 1}
_FORWARD, _BACKWARD = 0, 1
_is_grad_enabled = _torch.is_grad_enabled
_rotate = _posenc._rotate  # (q, k, cos, sin, q_out, k_out, unsqueeze_dim, layout, direction, rotary_dim)
_rotate_new = _posenc._rotate_new  # (q, k or None, cos, sin, unsqueeze_dim, layout, direction) -> new (q_out, k_out)
_plain_forward = _posenc._plain_forward  # (q, k, cos, sin, unsqueeze_dim, layout) -> (q_out, k_out) or None


def _layout_code(layout):
    try:
        return _LAYOUTS[layout]
    except (KeyError, TypeError):
        raise ValueError(f"layout must be 'half-split' or 'interleaved', got {layout!r}") from None


def _rotate_one(x, cos, sin, unsqueeze_dim, layout, direction):
    """A new tensor: x rotated, in the dtype torch's type promotion gives x * cos + rotate(x) * sin."""
    dtype = _torch.promote_types(_torch.promote_types(x.dtype, cos.dtype), sin.dtype)
    if dtype == x.dtype:
        out = _rotate_new(x, None, cos, sin, unsqueeze_dim, layout, direction)[0]
    else:  # widen first (exact), then rotate in place
        out = x.to(dtype, copy=True)
        _rotate(out, None, cos, sin, None, None, unsqueeze_dim, layout, direction, None)
    return out


def _rotate_pair(q, k, cos, sin, unsqueeze_dim, layout, direction):
    """New tensors (R q, R k) (direction backward: R^T); one call for both when the dtypes agree."""
    if q.dtype is k.dtype is cos.dtype is sin.dtype:
        return _rotate_new(q, k, cos, sin, unsqueeze_dim, layout, direction)
    return (_rotate_one(q, cos, sin, unsqueeze_dim, layout, direction),
            _rotate_one(k, cos, sin, unsqueeze_dim, layout, direction))


def _hf_order(x, rotary_dim, layout):
    """The rotated channels of x in half-split order (interleaved pairs (2i, 2i+1) -> (i, i + rotary_dim/2))."""
    xr = x[..., :rotary_dim]
    if layout == _LAYOUTS["interleaved"]:
        xr = _torch.cat((xr[..., 0::2], xr[..., 1::2]), dim=-1)
    return xr


def _rotate_half(x):
    half = x.shape[-1] // 2
    return _torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _cos_sin_grads(grads, inputs, cos, sin, unsqueeze_dim, layout):
    """dL/dcos and dL/dsin of HF's formula, out = x * cos + rotate_half(x) * sin (in half-split channel order),
    summed over q and k and over the dimensions cos/sin were broadcast along."""
    rotary_dim = cos.shape[-1]
    cos_u = cos.unsqueeze(unsqueeze_dim)
    grad_cos = grad_sin = None
    for g, x in zip(grads, inputs):
        if g is None:
            continue
        gr, xr = _hf_order(g, rotary_dim, layout), _hf_order(x, rotary_dim, layout)
        gc = (gr * xr).sum_to_size(cos_u.shape).squeeze(unsqueeze_dim)
        gs = (gr * _rotate_half(xr)).sum_to_size(cos_u.shape).squeeze(unsqueeze_dim)
        grad_cos = gc if grad_cos is None else grad_cos + gc
        grad_sin = gs if grad_sin is None else grad_sin + gs
    return grad_cos, grad_sin


class _ApplyRotary(_torch.autograd.Function):
    """(q, k, cos, sin) -> (R q, R k); backward: (R^T dq, R^T dk), the same kernel with sin negated."""

    @staticmethod
    def forward(ctx, q, k, cos, sin, unsqueeze_dim, layout):
        q_out, k_out = _rotate_pair(q, k, cos, sin, unsqueeze_dim, layout, _FORWARD)
        ctx.unsqueeze_dim, ctx.layout = unsqueeze_dim, layout
        ctx.q_dtype, ctx.k_dtype = q.dtype, k.dtype
        ctx.cos_sin_grad = ctx.needs_input_grad[2] or ctx.needs_input_grad[3]
        if ctx.cos_sin_grad:
            ctx.save_for_backward(cos, sin, q, k)
        else:
            ctx.save_for_backward(cos, sin)
        return q_out, k_out

    @staticmethod
    @_once_differentiable
    def backward(ctx, grad_q_out, grad_k_out):
        cos, sin = ctx.saved_tensors[:2]
        grad_q = grad_k = grad_cos = grad_sin = None
        if ctx.needs_input_grad[0] and grad_q_out is not None:
            grad_q = _rotate_one(grad_q_out, cos, sin, ctx.unsqueeze_dim, ctx.layout, _BACKWARD).to(ctx.q_dtype)
        if ctx.needs_input_grad[1] and grad_k_out is not None:
            grad_k = _rotate_one(grad_k_out, cos, sin, ctx.unsqueeze_dim, ctx.layout, _BACKWARD).to(ctx.k_dtype)
        if ctx.cos_sin_grad:
            q, k = ctx.saved_tensors[2:]
            grad_cos, grad_sin = _cos_sin_grads((grad_q_out, grad_k_out), (q, k), cos, sin, ctx.unsqueeze_dim,
                                                ctx.layout)
            grad_cos = grad_cos.to(cos.dtype) if ctx.needs_input_grad[2] and grad_cos is not None else None
            grad_sin = grad_sin.to(sin.dtype) if ctx.needs_input_grad[3] and grad_sin is not None else None
        return grad_q, grad_k, grad_cos, grad_sin, None, None


def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1, *, layout="half-split"):
    """Hugging Face's `apply_rotary_pos_emb`, computed by posenc: returns (q_embed, k_embed), new tensors.

    q: [batch, heads, seq, head_dim] (with unsqueeze_dim=1; [batch, seq, heads, head_dim] with 2), k likewise
    (its own number of heads: GQA). cos, sin: [batch, seq, rotary_dim] as HF's rotary embeddings return them
    (cat(freqs, freqs)); broadcast as cos.unsqueeze(unsqueeze_dim). rotary_dim < head_dim rotates the first
    channels and passes the rest through (as the partial-rotary variants of HF's function do).
    position_ids: unused, as in HF. layout (keyword-only, posenc's addition): 'interleaved' pairs (2i, 2i+1)
    with the same cos/sin, equal to HF's de-interleave, rotate, re-interleave.
    Differentiable in q, k, cos and sin when autograd needs it; otherwise a single kernel call per tensor.
    CPU float32/bfloat16/float16 only (TypeError otherwise); the result dtype follows torch's type promotion.
    Rounding: float32 inputs give HF's float32 result within the kernel's bound. For bfloat16/float16, posenc
    widens to float32, computes q * cos + rotate_half(q) * sin there and rounds once; HF's eager code rounds
    after each product and after the sum, so 20-30% of bfloat16 elements (random inputs) differ from HF's by
    one bfloat16 ulp. posenc's value is the more accurate one (the float32 rotation of the stored inputs,
    rounded once), not HF's bit pattern.
    Outputs of 4 MiB or more are allocated with torch.empty_like and advised to use transparent huge pages
    before they are written (first-touch page faults otherwise cost more than the rotation).
    """
    out = _plain_forward(q, k, cos, sin, unsqueeze_dim, layout)  # no autograd, one dtype: one C++ call
    if out is not None:
        return out
    layout_code = _layout_code(layout)
    if _is_grad_enabled() and (q.requires_grad or k.requires_grad or cos.requires_grad or sin.requires_grad):
        return _ApplyRotary.apply(q, k, cos, sin, unsqueeze_dim, layout_code)
    return _rotate_pair(q, k, cos, sin, unsqueeze_dim, layout_code, _FORWARD)


class RotaryEmbedding(_torch.nn.Module):
    """Like transformers' LlamaRotaryEmbedding: forward(x, position_ids) -> (cos, sin), [batch, seq, rotary_dim],
    attention factor folded in, in x's dtype and on x's device.

    config: a transformers PretrainedConfig, a config.json dict or path, or a posenc.RopeConfig; every rope type
    posenc supports (default, linear, dynamic, yarn, llama3, longrope, ntk). cos/sin use HF's float32 angle
    (within 2 ulp of HF's own values). dynamic and longrope follow HF's stateful `dynamic_rope_update`: the
    attributes inv_freq, max_seq_len_cached and attention_scaling change as HF's do.
    """

    def __init__(self, config, device=None):
        super().__init__()
        self.rope_config = RopeConfig.from_hf(config)
        self.rope_type = self.rope_config.rope_type
        self.max_seq_len_cached = self.rope_config.max_position_embeddings
        self.original_max_seq_len = self.rope_config.max_position_embeddings
        self._frequencies = self.rope_config.frequencies()
        self._state = HfDynamicRopeState(self.rope_config) if self.rope_type in ("dynamic", "longrope") else None
        inv_freq = _torch.from_numpy(self._frequencies.inv_freq)
        self.register_buffer("inv_freq", inv_freq if device is None else inv_freq.to(device), persistent=False)
        self.original_inv_freq = self.inv_freq
        self.attention_scaling = self._frequencies.attention_factor

    @_torch.no_grad()
    def forward(self, x, position_ids):
        position_ids = position_ids.cpu() if _torch.is_tensor(position_ids) else _torch.as_tensor(position_ids)
        frequencies = self._frequencies
        if self._state is not None and position_ids.numel() > 0:
            frequencies = self._state.update(int(position_ids.max()) + 1)
            self.max_seq_len_cached = self._state.max_seq_len_cached
            self.inv_freq = _torch.from_numpy(frequencies.inv_freq).to(self.inv_freq.device)
            self.attention_scaling = frequencies.attention_factor
        cos, sin = cos_sin(frequencies, position_ids, precision="hf")
        return (_torch.from_numpy(cos).to(device=x.device, dtype=x.dtype),
                _torch.from_numpy(sin).to(device=x.device, dtype=x.dtype))
