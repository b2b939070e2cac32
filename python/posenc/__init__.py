"""posenc: rotary position embeddings (RoPE) with Hugging Face semantics, from Python.

The C++ library behind it computes inv_freq for every Hugging Face rope type (default, linear, dynamic, yarn,
llama3, longrope; plus static NTK) within 1 ulp of transformers' own float32 values, cos/sin in two precisions, and
rotates query/key tensors in place with SIMD kernels. Arrays are NumPy arrays or CPU torch tensors (float32,
bfloat16 -- torch only -- and float16), used where they lie: nothing is copied.

    import posenc
    config = posenc.RopeConfig.from_hf("config.json")     # or a dict, or a transformers PretrainedConfig
    cos, sin = posenc.cos_sin(config, position_ids)         # [batch, seq, rotary_dim], like HF's rotary embedding
    posenc.apply_rope(q, k, cos, sin)                       # q [batch, heads, seq, head_dim], k likewise: in place

`posenc.torch` has the autograd-aware, drop-in replacements for transformers' `apply_rotary_pos_emb` and
`LlamaRotaryEmbedding`.

Errors: posenc.ConfigError, ShapeError and RangeError are ValueErrors (and posenc.Error); posenc.IoError is an
OSError. Arguments of the wrong kind or dtype raise TypeError; every message names the argument or config field.
"""
from ._posenc import (  # noqa: F401  (re-exported)
    ConfigError,
    Error,
    Frequencies,
    HfDynamicRopeState,
    IoError,
    RangeError,
    RopeConfig,
    ShapeError,
    cos_sin,
    kernel_target,
    openmp_max_threads,
)
from . import _posenc

__all__ = [
    "ConfigError", "Error", "Frequencies", "HfDynamicRopeState", "IoError", "RangeError", "RopeConfig",
    "ShapeError", "apply_rope", "cos_sin", "kernel_target", "openmp_max_threads",
]

_LAYOUTS = {"half-split": 0, "interleaved": 1}
_DIRECTIONS = {"forward": 0, "backward": 1, "inverse": 2}


def _code(table, value, name):
    try:
        return table[value]
    except (KeyError, TypeError):
        raise ValueError(f"{name} must be one of {', '.join(repr(k) for k in table)}, got {value!r}") from None


def apply_rope(q, k=None, cos=None, sin=None, *, position_ids=None, config=None, layout=None, rotary_dim=None,
               unsqueeze_dim=1, direction="forward", precision="exact", seq_len=None):
    """Rotates q and k in place by their positions and returns (q, k), the same objects.

    q, k: NumPy arrays or CPU torch tensors of float32, bfloat16 (torch) or float16, [..., head_dim] with one
        heads dimension, `unsqueeze_dim` (HF's name: the dimension where cos/sin get a size-1 axis). Default 1:
        [batch, heads, seq, head_dim] (HF's layout) or [seq, heads, head_dim]; 2 for [batch, seq, heads, head_dim].
        k may be None (q only) and may have another number of heads (GQA) and another dtype. The last dimension
        must be contiguous; other strides are free (slices of a packed qkv buffer, transposed views).
    cos, sin: as Hugging Face's rotary embeddings return them (and posenc.cos_sin), [..., seq, rotary_dim] with
        the two halves of the last dimension equal (cat(freqs, freqs)), broadcast like
        cos.unsqueeze(unsqueeze_dim) against q; float32/bfloat16/float16. rotary_dim < head_dim rotates the first
        rotary_dim channels and leaves the rest bit-identical (partial rotary).
    position_ids, config: instead of cos/sin, int64/int32 positions broadcast against q's token dimensions
        (all but heads and head_dim; [batch, seq] or [seq]), cos/sin computed inside the kernel from config (a
        posenc.RopeConfig, its table at seq_len -- default max(position_ids) + 1 -- or posenc.Frequencies) in
        `precision` ('exact' or 'hf').
    layout: 'half-split' (pairs (i, i + rotary_dim/2), HF/GPT-NeoX) or 'interleaved' ((2i, 2i+1), GPT-J, Meta's
        checkpoints). Default: the config's layout with position_ids, else 'half-split'. cos/sin use HF's
        cat(freqs, freqs) format in both: pair i turns by the angle in channel i.
    rotary_dim: optional check: must equal cos.shape[-1] (or the config's rotary_dim).
    direction: 'forward', 'backward' (the transpose: gradients) or 'inverse' (undoes forward).

    Math is float32; bfloat16/float16 results are rounded once. In-place updates of torch tensors bump their
    version counter as torch's own in-place ops do; tensors that require grad are refused while grad mode is on
    (use posenc.torch.apply_rotary_pos_emb there).
    Raises TypeError (not an array, CUDA tensor, float64, integer q) or ValueError (shapes that do not
    broadcast, a non-contiguous last dimension, overlapping rows, q and k sharing memory -- apply_rope(q, q, ...)
    or overlapping views of one buffer would rotate the shared rows twice; views of one buffer that interleave
    without sharing an element, such as q and k of a fused qkv projection, are fine -- cos halves that differ, a
    read-only array), naming the argument.
    """
    direction_code = _code(_DIRECTIONS, direction, "direction")
    if position_ids is None:
        if cos is None or sin is None:
            raise TypeError("apply_rope needs cos and sin, or position_ids and config")
        if config is not None or seq_len is not None:
            raise TypeError("config and seq_len go with position_ids, not with cos and sin")
        layout_code = _code(_LAYOUTS, "half-split" if layout is None else layout, "layout")
        _posenc._rotate(q, k, cos, sin, None, None, unsqueeze_dim, layout_code, direction_code, rotary_dim)
    else:
        if cos is not None or sin is not None:
            raise TypeError("give cos and sin, or position_ids and config, not both")
        if config is None:
            raise TypeError("position_ids needs config (a posenc.RopeConfig or posenc.Frequencies)")
        if layout is None:
            layout = config.layout if isinstance(config, RopeConfig) else "half-split"
        layout_code = _code(_LAYOUTS, layout, "layout")
        _posenc._rotate_positions(q, k, position_ids, config, seq_len, precision, unsqueeze_dim, layout_code,
                                  direction_code, rotary_dim)
    return q, k
