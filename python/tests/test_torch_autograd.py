"""posenc.torch.apply_rotary_pos_emb against Hugging Face's formula in torch: forward values, gradients with
respect to q, k (the transposed rotation) and cos/sin (HF's formula), for both layouts, partial rotary, GQA,
[b, h, s, d] and [b, s, h, d] layouts and bfloat16/float16 storage.

Bounds (u = 2^-24): each float32 output or gradient element is one evaluation of x c -/+ y s, within
(2 + u) u (|p1| + |p2|) of exact arithmetic whether fused or not (posenc) and likewise for torch's separate
multiply and add (HF); so the two agree within twice that. In bfloat16/float16 storage posenc rounds that float32
value once, and is checked against the exact result of the stored inputs. cos/sin gradients are sums over N
broadcast elements: any summation order is within N u sum |terms| of exact."""
import pytest
import torch

import posenc
import posenc.torch as pt
from hf_reference import (U, deinterleave, pair_products, random_tensor, reference_rotation, reinterleave,
                          rotate_half, storage_bound)

LAYOUTS = ["half-split", "interleaved"]


def make_inputs(dtype, shape_q, shape_k, rd, seq_axis_len, seed, unsqueeze_dim=1, batch=2):
    cfg = posenc.RopeConfig.from_hf({"head_dim": shape_q[-1], "partial_rotary_factor": rd / shape_q[-1],
                                     "rope_theta": 10000.0})
    pos = torch.arange(seq_axis_len)[None].repeat(batch, 1) + torch.tensor([[0], [1000]])[:batch]
    c, s = posenc.cos_sin(cfg, pos)
    cos, sin = torch.from_numpy(c).to(dtype), torch.from_numpy(s).to(dtype)
    return random_tensor(shape_q, seed, dtype), random_tensor(shape_k, seed + 1, dtype), cos, sin


CASES = [  # (q shape, k shape, rotary_dim, unsqueeze_dim): GQA, partial rotary, [b, s, h, d]
    ((2, 8, 13, 64), (2, 2, 13, 64), 64, 1),
    ((2, 4, 13, 96), (2, 4, 13, 96), 32, 1),
    ((2, 13, 6, 64), (2, 13, 3, 64), 64, 2),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_float32_forward_and_gradients_match_hf_autograd(layout, case):
    shape_q, shape_k, rd, ud = CASES[case]
    seq = shape_q[2] if ud == 1 else shape_q[1]
    q, k, cos, sin = make_inputs(torch.float32, shape_q, shape_k, rd, seq, 20 + case)
    gq, gk = random_tensor(shape_q, 30 + case), random_tensor(shape_k, 40 + case)

    q1, k1 = q.clone().requires_grad_(), k.clone().requires_grad_()
    qe, ke = pt.apply_rotary_pos_emb(q1, k1, cos, sin, unsqueeze_dim=ud, layout=layout)
    assert qe.grad_fn is not None and "ApplyRotary" in type(qe.grad_fn).__name__
    torch.autograd.backward((qe, ke), (gq, gk))

    q2, k2 = q.clone().requires_grad_(), k.clone().requires_grad_()
    qr, kr = reference_rotation(q2, k2, cos, sin, ud, layout)
    torch.autograd.backward((qr, kr), (gq, gk))

    for got, want, x in ((qe, qr, q), (ke, kr, k)):
        bound = 2 * (2 + U) * U * pair_products(x, cos, sin, ud, layout)
        assert bool(((got.double() - want.double()).abs() <= bound).all())
        assert got.shape == want.shape and got.dtype == want.dtype
    # backward = R^T g: the pairs' products are g's with (c, s)
    for got, want, g in ((q1.grad, q2.grad, gq), (k1.grad, k2.grad, gk)):
        bound = 2 * (2 + U) * U * pair_products(g, cos, sin, ud, layout)
        assert bool(((got.double() - want.double()).abs() <= bound).all())
    assert torch.equal(q1.grad[..., rd:], gq[..., rd:])  # pass-through channels: identity gradient


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_half_precision_forward_and_gradients_round_once(dtype, layout):
    q, k, cos, sin = make_inputs(dtype, (2, 4, 9, 64), (2, 2, 9, 64), 64, 9, 50)
    gq, gk = random_tensor(q.shape, 51, dtype), random_tensor(k.shape, 52, dtype)
    q1, k1 = q.clone().requires_grad_(), k.clone().requires_grad_()
    qe, ke = pt.apply_rotary_pos_emb(q1, k1, cos, sin, layout=layout)
    assert qe.dtype == dtype and ke.dtype == dtype
    torch.autograd.backward((qe, ke), (gq, gk))
    for got, x in ((qe, q), (ke, k)):
        exact, _ = reference_rotation(x.double(), x.double(), cos.double(), sin.double(), 1, layout)
        bound = storage_bound(exact, pair_products(x, cos, sin, 1, layout), dtype)
        assert bool(((got.double() - exact).abs() <= bound).all())
    # the exact gradient of the stored values: R^T g, i.e. the rotation by -angle
    for got, g in ((q1.grad, gq), (k1.grad, gk)):
        exact, _ = reference_rotation(g.double(), g.double(), cos.double(), -sin.double(), 1, layout)
        bound = storage_bound(exact, pair_products(g, cos, sin, 1, layout), dtype)
        assert got.dtype == dtype
        assert bool(((got.double() - exact).abs() <= bound).all())


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cos_sin_gradients_match_hf_autograd(layout):
    # GQA: 4 q heads and 2 k heads share each cos/sin entry, so each of its gradients sums N = 6 products
    q, k, cos, sin = make_inputs(torch.float32, (2, 4, 7, 32), (2, 2, 7, 32), 32, 7, 60)
    gq, gk = random_tensor(q.shape, 61), random_tensor(k.shape, 62)
    cos1, sin1 = cos.clone().requires_grad_(), sin.clone().requires_grad_()
    cos2, sin2 = cos.clone().requires_grad_(), sin.clone().requires_grad_()
    q1, q2 = q.clone().requires_grad_(), q.clone().requires_grad_()
    torch.autograd.backward(pt.apply_rotary_pos_emb(q1, k, cos1, sin1, layout=layout), (gq, gk))
    torch.autograd.backward(reference_rotation(q2, k, cos2, sin2, 1, layout), (gq, gk))
    rd = cos.shape[-1]

    def hf_order(x):
        return (x if layout == "half-split" else deinterleave(x, rd)).double()

    for got, want, partner in ((cos1.grad, cos2.grad, lambda x: x), (sin1.grad, sin2.grad, rotate_half)):
        terms = sum((hf_order(g).abs() * partner(hf_order(x)).abs()).sum(1) for g, x in ((gq, q), (gk, k)))
        bound = 2 * 6 * U * terms  # each result within N u sum|terms| of exact, whatever the summation order
        assert got.shape == want.shape == cos.shape
        assert bool(((got.double() - want.double()).abs() <= bound).all())
    bound = 2 * (2 + U) * U * pair_products(gq, cos, sin, 1, layout)
    assert bool(((q1.grad.double() - q2.grad.double()).abs() <= bound).all())


def test_no_grad_path_returns_new_tensors_and_leaves_inputs():
    q, k, cos, sin = make_inputs(torch.float32, (1, 4, 5, 64), (1, 1, 5, 64), 64, 5, 70, batch=1)
    q0, k0 = q.clone(), k.clone()
    with torch.no_grad():
        qe, ke = pt.apply_rotary_pos_emb(q, k, cos, sin, position_ids=torch.arange(5)[None])
    assert qe.data_ptr() != q.data_ptr() and ke.data_ptr() != k.data_ptr()
    assert torch.equal(q, q0) and torch.equal(k, k0) and q._version == 0
    qr, kr = reference_rotation(q, k, cos, sin)
    assert bool(((qe - qr).abs().double() <= 2 * (2 + U) * U * pair_products(q, cos, sin)).all())
    # inputs that do not require grad take the same path in grad mode
    qe2, _ = pt.apply_rotary_pos_emb(q, k, cos, sin)
    assert qe2.grad_fn is None and torch.equal(qe2, qe)


def test_mixed_dtypes_follow_torch_promotion():
    # HF: bfloat16 q times float32 cos is float32; posenc widens q exactly and rotates in float32
    q, k, cos, sin = make_inputs(torch.float32, (1, 2, 5, 32), (1, 2, 5, 32), 32, 5, 80, batch=1)
    qb = q.bfloat16()
    qe, ke = pt.apply_rotary_pos_emb(qb, k, cos, sin)
    qr, _ = reference_rotation(qb.float(), k, cos, sin)
    assert qe.dtype == torch.float32 and ke.dtype == torch.float32
    assert bool(((qe - qr).abs().double() <= 2 * (2 + U) * U * pair_products(qb.float(), cos, sin)).all())
    qg = qb.clone().requires_grad_()
    qe, _ = pt.apply_rotary_pos_emb(qg, k, cos, sin)
    qe.sum().backward()
    assert qg.grad.dtype == torch.bfloat16


def test_expanded_gradient_and_expanded_input():
    # .sum()'s gradient is an expanded tensor (stride 0): rotated from a dense copy
    q, k, cos, sin = make_inputs(torch.float32, (1, 3, 4, 16), (1, 1, 4, 16), 16, 4, 90, batch=1)
    q1 = q.clone().requires_grad_()
    qe, ke = pt.apply_rotary_pos_emb(q1, k.expand(1, 3, 4, 16), cos, sin)
    qe.sum().backward()
    ones = torch.ones_like(q)
    want, _ = reference_rotation(ones, ones, cos, -sin)
    assert bool(((q1.grad - want).abs().double() <= 2 * (2 + U) * U * pair_products(ones, cos, sin)).all())
    kr, _ = reference_rotation(k.expand(1, 3, 4, 16).contiguous(), k, cos, sin)
    assert bool(((ke - kr).abs().double() <= 2 * (2 + U) * U * pair_products(kr, cos, sin)).all())


def test_interleaved_equals_deepseek_deinterleave_rotate_reinterleave():
    q, k, cos, sin = make_inputs(torch.float32, (1, 2, 6, 64), (1, 2, 6, 64), 64, 6, 95, batch=1)
    qe, _ = pt.apply_rotary_pos_emb(q, k, cos, sin, layout="interleaved")
    hf_q, _ = reference_rotation(deinterleave(q, 64), deinterleave(k, 64), cos, sin)  # DeepSeek's HF path
    assert bool(((reinterleave(hf_q, 64) - qe).abs().double()
                 <= 2 * (2 + U) * U * pair_products(q, cos, sin, 1, "interleaved")).all())


def test_errors():
    q, k, cos, sin = make_inputs(torch.float32, (1, 2, 4, 16), (1, 2, 4, 16), 16, 4, 99, batch=1)
    with pytest.raises(ValueError, match="layout must be"):
        pt.apply_rotary_pos_emb(q, k, cos, sin, layout="gptj")
    with pytest.raises(TypeError, match="float64"):
        pt.apply_rotary_pos_emb(q.double(), k.double(), cos.double(), sin.double())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_large_tensors_blocked_out_of_place_path(dtype):
    # >= 1 MiB moved: q and k are rotated separately into new tensors in blocks of tokens on OpenMP threads, and
    # q's 4 MiB (float32) output gets the huge-page advice; values as for small tensors, in [b, h, s, d] (token
    # stride head_dim) and in a transposed [b, s, h, d] view.
    q, k, cos, sin = make_inputs(dtype, (1, 8, 1024, 128), (1, 2, 1024, 128), 128, 1024, 110, batch=1)
    for qq, kk in ((q, k), (q.transpose(1, 2).contiguous().transpose(1, 2), k)):
        q1 = qq.clone().requires_grad_()
        qe, ke = pt.apply_rotary_pos_emb(q1, kk, cos, sin)
        for got, x in ((qe, qq), (ke, kk)):
            exact, _ = reference_rotation(x.double(), x.double(), cos.double(), sin.double())
            bound = storage_bound(exact, pair_products(x, cos, sin), dtype)
            assert bool(((got.double() - exact).abs() <= bound).all())
        g = random_tensor(qq.shape, 111, dtype)
        qe.backward(g)
        exact, _ = reference_rotation(g.double(), g.double(), cos.double(), -sin.double())
        assert bool(((q1.grad.double() - exact).abs() <= storage_bound(exact, pair_products(g, cos, sin), dtype)).all())
