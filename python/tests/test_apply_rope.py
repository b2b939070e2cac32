"""posenc.apply_rope: in place on NumPy arrays and CPU torch tensors (float32, bfloat16, float16), zero copies,
strided views, both layouts, partial rotary, GQA; against HF's formula evaluated exactly (float64) on the stored
inputs, within the kernel's documented float32 bound plus one rounding to the storage type; and every refusal
naming its argument."""
import numpy as np
import pytest
import torch

import posenc
from hf_reference import (U, config_json, deinterleave, pair_products, random_tensor, reference,
                          reference_rotation, storage_bound)

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
LAYOUTS = ["half-split", "interleaved"]


def cos_sin_torch(cfg, position_ids, dtype=torch.float32):
    c, s = posenc.cos_sin(cfg, position_ids)
    return torch.from_numpy(c).to(dtype), torch.from_numpy(s).to(dtype)


def check_rotation(got, x, cos, sin, unsqueeze_dim, layout, dtype):
    """got (the rotated x) against the exact rotation of x's stored values with cos/sin's stored values."""
    exact, _ = reference_rotation(x.double(), x.double(), cos.double(), sin.double(), unsqueeze_dim, layout)
    bound = storage_bound(exact, pair_products(x, cos, sin, unsqueeze_dim, layout), dtype)
    err = (got.double() - exact).abs()
    assert bool((err <= bound).all()), f"max error {err.max().item()} over bound at {(err - bound).argmax()}"
    rd = cos.shape[-1]
    assert torch.equal(got[..., rd:], x[..., rd:])  # pass-through channels bit-identical


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_torch_in_place_zero_copy_gqa_partial(dtype, layout):
    # GQA (8 query heads, 2 kv heads), head_dim 64 with rotary_dim 32 (partial), HF layout [b, h, s, d]
    cfg = posenc.RopeConfig.from_hf({"head_dim": 64, "partial_rotary_factor": 0.5, "rope_theta": 10000.0})
    q = random_tensor((2, 8, 11, 64), 1, dtype)
    k = random_tensor((2, 2, 11, 64), 2, dtype)
    pos = torch.tensor([list(range(11)), list(range(100, 111))])
    cos, sin = cos_sin_torch(cfg, pos, dtype)
    q0, k0 = q.clone(), k.clone()
    q_ptr, k_ptr = q.data_ptr(), k.data_ptr()
    rq, rk = posenc.apply_rope(q, k, cos, sin, layout=layout)
    assert rq is q and rk is k and q.data_ptr() == q_ptr and k.data_ptr() == k_ptr
    assert q.dtype == dtype and q._version > 0 and k._version > 0  # torch knows they were written
    check_rotation(q, q0, cos, sin, 1, layout, dtype)
    check_rotation(k, k0, cos, sin, 1, layout, dtype)


@pytest.mark.parametrize("np_dtype", [np.float32, np.float16])
def test_numpy_in_place_zero_copy(np_dtype):
    cfg = posenc.RopeConfig.from_hf(config_json("llama3.1-8b"))
    q = random_tensor((3, 4, 128), 3).numpy().astype(np_dtype)  # [seq, heads, head_dim]
    k = random_tensor((3, 1, 128), 4).numpy().astype(np_dtype)
    cos, sin = posenc.cos_sin(cfg, np.array([0, 9, 4095]))
    q0, k0 = q.copy(), k.copy()
    address = q.__array_interface__["data"][0]
    posenc.apply_rope(q, k, cos, sin)
    assert q.__array_interface__["data"][0] == address
    tdt = torch.float32 if np_dtype == np.float32 else torch.float16
    check_rotation(torch.from_numpy(q), torch.from_numpy(q0), torch.from_numpy(cos), torch.from_numpy(sin), 1,
                   "half-split", tdt)
    check_rotation(torch.from_numpy(k), torch.from_numpy(k0), torch.from_numpy(cos), torch.from_numpy(sin), 1,
                   "half-split", tdt)


def test_strided_views_packed_qkv_and_seq_major():
    # q, k, v as slices of one packed [b, s, 3, h, d] buffer, rotated as [b, s, h, d] (unsqueeze_dim 2): no copy,
    # v untouched; also a transposed [b, h, s, d] view of a [b, s, h, d] tensor
    cfg = posenc.RopeConfig.from_hf(config_json("llama2-7b"))
    qkv = random_tensor((2, 7, 3, 4, 128), 5)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    before = qkv.clone()
    cos, sin = cos_sin_torch(cfg, torch.arange(7)[None].expand(2, 7))
    posenc.apply_rope(q, k, cos, sin, unsqueeze_dim=2)
    assert torch.equal(qkv[:, :, 2], before[:, :, 2])
    check_rotation(qkv[:, :, 0], before[:, :, 0], cos, sin, 2, "half-split", torch.float32)
    check_rotation(qkv[:, :, 1], before[:, :, 1], cos, sin, 2, "half-split", torch.float32)
    bshd = random_tensor((2, 7, 4, 128), 6)
    bhsd = bshd.transpose(1, 2)
    x0 = bhsd.clone()
    posenc.apply_rope(bhsd, None, cos, sin)
    check_rotation(bhsd, x0, cos, sin, 1, "half-split", torch.float32)
    # negative strides (a reversed NumPy view)
    a = random_tensor((6, 2, 16), 7).numpy()
    rev = a[::-1]
    r0 = rev.copy()
    c, s = posenc.cos_sin(posenc.RopeConfig.from_hf({"head_dim": 16}), np.arange(6))
    posenc.apply_rope(rev, None, c, s)
    check_rotation(torch.from_numpy(rev.copy()), torch.from_numpy(r0), torch.from_numpy(c), torch.from_numpy(s), 1,
                   "half-split", torch.float32)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_position_ids_on_the_fly_matches_table(layout):
    # On the fly the kernel's cos/sin are within 1 ulp (<= 2^-23 for |value| <= 1) of the table's; the two results
    # then differ by the rotation bound twice plus (|a| + |b|) 2^-23 (attention factor 1 here).
    cfg = posenc.RopeConfig.from_hf(config_json("llama3.1-8b"))
    x = random_tensor((1, 4, 9, 128), 8)
    pos = torch.tensor([[0, 1, 2, 3, 500, 501, 4095, 8000, 20000]])
    a, b = x.clone(), x.clone()
    cos, sin = cos_sin_torch(cfg, pos)
    posenc.apply_rope(a, None, cos, sin, layout=layout)
    posenc.apply_rope(b, None, position_ids=pos, config=cfg, layout=layout)
    ab = pair_products(x, torch.ones_like(cos), torch.ones_like(sin), 1, layout)  # |a| + |b| per output
    bound = 2 * (2 + U) * U * ab + ab * 2.0 ** -23
    assert bool(((a.double() - b.double()).abs() <= bound).all())
    # the config's own layout by default (deepseek: interleaved)
    ds = posenc.RopeConfig.from_hf(config_json("deepseek-v3"))
    y = random_tensor((3, 2, 64), 9)
    y1, y2 = y.clone(), y.clone()
    posenc.apply_rope(y1, None, position_ids=[1, 2, 3], config=ds)
    posenc.apply_rope(y2, None, position_ids=[1, 2, 3], config=ds, layout="interleaved")
    assert torch.equal(y1, y2)


@pytest.mark.parametrize("index", range(len(reference()["apply_rotary_examples"])))
def test_hf_apply_examples(index):
    # HF's own q_embed/k_embed (float32 run, HF's cos/sin passed in): both evaluations within the float32 bound of
    # exact, so within twice it of each other. DeepSeek's are in de-interleaved channel order.
    ex = reference()["apply_rotary_examples"][index]
    interleaved = ex["config"] == "deepseek-v3"
    layout = "interleaved" if interleaved else "half-split"
    for case in (c for c in ex["cases"] if c["precision"] == "float32"):
        cos = torch.tensor(case["cos"], dtype=torch.float32)[None]  # [1, seq, rotary_dim]
        sin = torch.tensor(case["sin"], dtype=torch.float32)[None]
        for which in ("q", "k"):
            x = torch.tensor(ex[which], dtype=torch.float32)
            got = x.clone()
            posenc.apply_rope(got, None, cos, sin, layout=layout)
            want = torch.tensor(case[which + "_embed"], dtype=torch.float64)
            rd = cos.shape[-1]
            if interleaved:
                got = deinterleave(got, rd)
            bound = 2 * (2 + U) * U * pair_products(deinterleave(x, rd) if interleaved else x, cos, sin)
            assert bool(((got.double() - want).abs() <= bound).all()), (ex["config"], which)


def test_empty_and_single_token():
    cfg = posenc.RopeConfig.from_hf({"head_dim": 8})
    cos, sin = cos_sin_torch(cfg, torch.zeros(1, 0, dtype=torch.int64))
    q = torch.zeros(1, 2, 0, 8)
    posenc.apply_rope(q, None, cos, sin)  # nothing to do, no error
    cos, sin = cos_sin_torch(cfg, torch.tensor([[5]]))
    q = random_tensor((1, 3, 1, 8), 10)
    q0 = q.clone()
    posenc.apply_rope(q, None, cos, sin)
    check_rotation(q, q0, cos, sin, 1, "half-split", torch.float32)


def test_empty_numpy_arrays_whose_strides_are_zero():
    # NumPy gives every dimension of an empty array stride 0 (np.empty((1, 4, 0, 8)).strides == (0, 0, 0, 0)):
    # valid inputs with no element, not a head_dim that is not contiguous.
    cfg = posenc.RopeConfig.from_hf({"head_dim": 8})
    for shape in [(1, 4, 0, 8), (0, 4, 3, 8), (1, 0, 3, 8)]:
        q = np.empty(shape, dtype=np.float32)
        k = np.empty(shape, dtype=np.float32)
        pos = np.zeros((shape[0], shape[2]), dtype=np.int64)
        got_q, got_k = posenc.apply_rope(q, k, position_ids=pos, config=cfg)
        assert got_q is q and got_k is k and got_q.shape == shape
        cos, sin = posenc.cos_sin(cfg, pos)
        got_q, got_k = posenc.apply_rope(q, k, cos, sin)
        assert got_q is q and got_k is k
    # An array with elements still needs a contiguous head_dim.
    with pytest.raises(ValueError, match="last dimension .head_dim. must be contiguous"):
        posenc.apply_rope(np.zeros((1, 2, 8, 4), dtype=np.float32).transpose(0, 1, 3, 2), None,
                          position_ids=np.arange(4)[None], config=cfg)


def test_refusals_name_the_argument():
    cfg = posenc.RopeConfig.from_hf({"head_dim": 8})
    cos, sin = cos_sin_torch(cfg, torch.arange(4)[None])
    q = random_tensor((1, 2, 4, 8), 11)
    with pytest.raises(TypeError, match="q must be float32, bfloat16.*float64"):
        posenc.apply_rope(q.double(), None, cos, sin)
    with pytest.raises(TypeError, match="k must be float32.*int64"):
        posenc.apply_rope(q, torch.zeros(1, 2, 4, 8, dtype=torch.int64), cos, sin)
    with pytest.raises(TypeError, match="q must be a CPU tensor, got a tensor on meta"):
        posenc.apply_rope(torch.empty(1, 2, 4, 8, device="meta"), None, cos, sin)
    with pytest.raises(TypeError, match="q must be a NumPy array or a CPU torch tensor, got list"):
        posenc.apply_rope([[1.0]], None, cos, sin)
    with pytest.raises(TypeError, match="cos must be float32.*float64"):
        posenc.apply_rope(q, None, cos.double(), sin)
    with pytest.raises(TypeError, match="q must be a strided"):
        posenc.apply_rope(q.to_sparse(), None, cos, sin)
    with pytest.raises(ValueError, match="last dimension .head_dim. must be contiguous"):
        posenc.apply_rope(random_tensor((1, 2, 8, 4), 12).transpose(2, 3), None, cos, sin)
    with pytest.raises(ValueError, match="overlap"):
        posenc.apply_rope(random_tensor((1, 1, 4, 8), 13).expand(1, 2, 4, 8), None, cos, sin)
    with pytest.raises(ValueError, match="cos of shape .1, 4, 8. does not broadcast to q"):
        posenc.apply_rope(random_tensor((1, 2, 5, 8), 14), None, cos, sin)
    with pytest.raises(ValueError, match="sin must have the shape of cos"):
        posenc.apply_rope(q, None, cos, sin[:, :2])
    bad = cos.clone()
    bad[0, 1, 5] += 0.25
    with pytest.raises(ValueError, match="cos must repeat its first half.*channel 1 and channel 5 differ in row 1"):
        posenc.apply_rope(q, None, bad, sin)
    with pytest.raises(ValueError, match="rotary_dim.*must be <= head_dim"):
        posenc.apply_rope(random_tensor((1, 2, 4, 4), 15), None, cos, sin)
    with pytest.raises(ValueError, match="rotary_dim = 6 disagrees"):
        posenc.apply_rope(q, None, cos, sin, rotary_dim=6)
    with pytest.raises(ValueError, match="k and q must have the same head_dim"):
        posenc.apply_rope(q, random_tensor((1, 2, 4, 16), 16), cos, sin)
    with pytest.raises(ValueError, match="unsqueeze_dim"):
        posenc.apply_rope(q, None, cos, sin, unsqueeze_dim=3)
    with pytest.raises(ValueError, match="layout must be one of"):
        posenc.apply_rope(q, None, cos, sin, layout="neox")
    frozen = random_tensor((4, 2, 8), 17).numpy()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="q is a read-only NumPy array"):
        posenc.apply_rope(frozen, None, cos[0], sin[0])
    with pytest.raises(ValueError, match="q requires grad"):
        posenc.apply_rope(q.clone().requires_grad_(), None, cos, sin)
    with pytest.raises(TypeError, match="position_ids needs config"):
        posenc.apply_rope(q, None, position_ids=[0, 1, 2, 3])
    with pytest.raises(ValueError, match="position_ids of shape .5,. does not broadcast"):
        posenc.apply_rope(q, None, position_ids=[0, 1, 2, 3, 4], config=cfg)
    with pytest.raises(posenc.RangeError, match="position_ids"):
        posenc.apply_rope(q, None, position_ids=[0, 1, 2, 2 ** 30], config=cfg)


def test_in_place_write_is_seen_by_autograd():
    # torch's contract for in-place ops: a tensor saved for backward and then modified makes backward fail
    cfg = posenc.RopeConfig.from_hf({"head_dim": 8})
    cos, sin = cos_sin_torch(cfg, torch.arange(4)[None])
    x = random_tensor((1, 2, 4, 8), 18)
    w = torch.ones(8, requires_grad=True)
    y = (w * x).sum()  # saves x for w's gradient
    posenc.apply_rope(x, None, cos, sin)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
    with torch.no_grad():  # under no_grad a leaf that requires grad may be written, as with torch's own ops
        p = random_tensor((1, 2, 4, 8), 19).requires_grad_()
        posenc.apply_rope(p, None, cos, sin)


@pytest.mark.parametrize("with_positions", [False, True])
def test_q_and_k_sharing_memory_are_refused(with_positions):
    # apply_rope(q, q, ...) or views of one buffer that share rows would rotate those rows twice (HF's function
    # returns two rotated copies): refused, nothing written. Interleaved views that share no element are fine.
    cfg = posenc.RopeConfig.from_hf({"head_dim": 8, "rope_theta": 10000.0})
    pos = torch.arange(5)  # [seq]

    def rotate(q, k):
        if with_positions:
            return posenc.apply_rope(q, k, position_ids=pos, config=cfg)
        cos, sin = cos_sin_torch(cfg, pos[None])  # [batch, seq, rotary_dim], unsqueezed at the heads axis
        return posenc.apply_rope(q, k, cos, sin)

    x = random_tensor((1, 4, 5, 8), 7, torch.float32)
    x0 = x.clone()
    for q, k in [(x, x), (x[:, :3], x[:, 2:]), (x[:, 0:2], x[:, 1:4:2])]:
        with pytest.raises(ValueError, match="q and k share memory"):
            rotate(q, k)
        assert torch.equal(x, x0)
    # q and k of a fused projection [batch, seq, 2 * heads * head_dim]: interleaved in memory, disjoint
    qk = random_tensor((1, 5, 2 * 2 * 8), 8, torch.float32)
    q = qk[..., :16].view(1, 5, 2, 8).transpose(1, 2)
    k = qk[..., 16:].view(1, 5, 2, 8).transpose(1, 2)
    q_sep, k_sep = q.clone(), k.clone()
    rotate(q, k)
    rotate(q_sep, k_sep)
    assert torch.equal(q, q_sep) and torch.equal(k, k_sep)


def test_import_refuses_an_openmp_thread_count_past_any_machine():
    # OMP_NUM_THREADS=100000 crashed libgomp in the first rotation: refused at import, naming the variable.
    import os
    import subprocess
    import sys
    env = dict(os.environ, OMP_NUM_THREADS="100000")
    r = subprocess.run([sys.executable, "-c", "import posenc"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "OMP_NUM_THREADS=100000 asks for 100000 OpenMP threads" in r.stderr
