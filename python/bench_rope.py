#!/usr/bin/python3
"""posenc.torch.apply_rotary_pos_emb against Hugging Face's torch code on the CPU, in one run.

Usage (after building; see README.md):
    PYTHONPATH=build/python /usr/bin/python3 python/bench_rope.py [--threads N] [--reps R] [--seq 4096,1]
        [--json out.json]

Cases: q and k of shape [1, 32, seq, 128] (HF's [batch, heads, seq, head_dim]) with seq 4096 (prefill) and 1
(a decode step), float32 and bfloat16, cos/sin [1, seq, 128] in the same dtype as HF's rotary embedding returns
them. For each case, interleaved repetitions (one call of each variant per repetition), best and median:
  hf_fwd        transformers' rotate_half + apply_rotary_pos_emb (returns new tensors)
  posenc_fwd    posenc.torch.apply_rotary_pos_emb, same signature and result (inputs without grad: no autograd)
  hf_fwd_bwd    forward with q, k requiring grad, then backward of given output gradients
  posenc_fwd_bwd  the same through posenc's autograd Function (backward: the transposed rotation)
  posenc_inplace  posenc.apply_rope in place (no output allocation; not HF's contract, shown for reference)
  posenc_fwd_4k   posenc_fwd's rotation into outputs from torch.empty_like without posenc's huge-page advice
                  (4 KiB pages, as HF's temporaries get them): what the advice is worth
  cxx_rotation    (decode) the C++ side of posenc_fwd alone, timed inside C++ (arguments read once, the same
                  table build, copies and kernel calls into preallocated outputs)
Decode cases give the Python-call overhead of posenc_fwd as its best time per call minus cxx_rotation's best.
Each case is checked once against HF's result before timing (within the derived rounding bounds).
torch and posenc share libgomp, so torch.set_num_threads(N) sets both; the script checks that they agree.
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

# This file sits beside the package's sources (python/posenc/, without the compiled module): import the built
# package from PYTHONPATH instead of the directory Python puts first for a script.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import torch  # noqa: E402

import posenc  # noqa: E402
import posenc.torch as pt  # noqa: E402
from posenc import _posenc  # noqa: E402

U = 2.0 ** -24


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def hf_apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def inputs(seq, dtype):
    g = torch.Generator().manual_seed(seq)
    q = torch.randn(1, 32, seq, 128, generator=g).to(dtype)
    k = torch.randn(1, 32, seq, 128, generator=g).to(dtype)
    cfg = posenc.RopeConfig.from_hf({"head_dim": 128, "rope_theta": 500000.0})
    positions = torch.arange(seq)[None] if seq > 1 else torch.tensor([[4095]])
    cos, sin = pt.RotaryEmbedding(cfg)(q, positions)
    return q, k, cos, sin


def validate(q, k, cos, sin):
    """posenc's and HF's outputs against the exact rotation of the stored inputs: posenc within (2 + u) u (|p1| +
    |p2|) in float32 plus one rounding to the storage type; HF rounds each of its three operations to the storage
    type (unit roundoff e), within (2 + e) e (|p1| + |p2|)."""
    got = pt.apply_rotary_pos_emb(q, k, cos, sin)
    want = hf_apply_rotary_pos_emb(q, k, cos, sin)
    c, s = cos.double().unsqueeze(1), sin.double().unsqueeze(1)
    e = {torch.float32: U, torch.bfloat16: 2.0 ** -8}[q.dtype]
    for x, a, b in ((q, got[0], want[0]), (k, got[1], want[1])):
        xd = x.double()
        exact = xd * c + rotate_half(xd) * s
        products = xd.abs() * c.abs() + rotate_half(xd).abs() * s.abs()
        e32 = (2 + U) * U * products
        ours = e32 if e == U else e32 + e * (exact.abs() + e32)  # one rounding to bfloat16: <= e |value|
        if not bool(((a.double() - exact).abs() <= ours).all()):
            raise SystemExit("posenc result outside its bound")
        if not bool(((b.double() - exact).abs() <= (2 + e) * e * products).all()):
            raise SystemExit("HF result outside its bound")


def time_calls(fns, reps, inner, self_timed=None):
    """Interleaved: each repetition runs every variant `inner` times in a row; seconds per call, best and median.
    self_timed: variants that time themselves (called once per repetition with `inner`, return seconds per call)."""
    self_timed = self_timed or {}
    samples = {name: [] for name in list(fns) + list(self_timed)}
    for _ in range(reps):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples[name].append((time.perf_counter() - t0) / inner)
        for name, fn in self_timed.items():
            samples[name].append(fn(inner))
    return {name: {"best_s": min(v), "median_s": statistics.median(v)} for name, v in samples.items()}


def fwd_bwd(apply, q, k, cos, sin, gq, gk):
    qg, kg = q.detach().requires_grad_(), k.detach().requires_grad_()
    out = apply(qg, kg, cos, sin)
    torch.autograd.backward(out, (gq, gk))
    return qg.grad


def fwd_without_huge_pages(q, k, cos, sin):
    """posenc_fwd's work with outputs from torch.empty_like in Python, so without posenc's huge-page advice."""
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    _posenc._rotate(q, k, cos, sin, q_out, k_out, 1, 0, 0, None)
    return q_out, k_out


def run_case(seq, dtype, reps):
    q, k, cos, sin = inputs(seq, dtype)
    validate(q, k, cos, sin)
    gq, gk = torch.randn_like(q), torch.randn_like(k)
    qi, ki = q.clone(), k.clone()
    fns = {
        "hf_fwd": lambda: hf_apply_rotary_pos_emb(q, k, cos, sin),
        "posenc_fwd": lambda: pt.apply_rotary_pos_emb(q, k, cos, sin),
        "hf_fwd_bwd": lambda: fwd_bwd(hf_apply_rotary_pos_emb, q, k, cos, sin, gq, gk),
        "posenc_fwd_bwd": lambda: fwd_bwd(pt.apply_rotary_pos_emb, q, k, cos, sin, gq, gk),
        "posenc_inplace": lambda: posenc.apply_rope(qi, ki, cos, sin),
        "posenc_fwd_4k": lambda: fwd_without_huge_pages(q, k, cos, sin),
    }
    self_timed = {}
    if seq == 1:  # the C++ side of posenc_fwd alone (arguments read once), in the same repetitions
        q_out, k_out = torch.empty_like(q), torch.empty_like(k)
        self_timed["cxx_rotation"] = lambda n: _posenc._time_rotate(q, k, cos, sin, q_out, k_out, 1, 0, n)
    inner = 1 if seq > 1 else 2000
    result = {"seq": seq, "dtype": str(dtype).replace("torch.", ""), "shape": list(q.shape),
              "timings": time_calls(fns, reps, inner, self_timed)}
    t = result["timings"]
    result["speedup_fwd"] = t["hf_fwd"]["best_s"] / t["posenc_fwd"]["best_s"]
    result["speedup_fwd_bwd"] = t["hf_fwd_bwd"]["best_s"] / t["posenc_fwd_bwd"]["best_s"]
    if seq == 1:
        result["python_overhead_s"] = t["posenc_fwd"]["best_s"] - t["cxx_rotation"]["best_s"]
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--seq", default="4096,1", help="sequence lengths to run (comma-separated; 1 = decode)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if posenc.openmp_max_threads() != args.threads:
        raise SystemExit(f"torch uses {args.threads} threads but posenc's OpenMP {posenc.openmp_max_threads()}")
    report = {"torch": torch.__version__, "threads": args.threads, "kernel_target": posenc.kernel_target(),
              "cpu": platform.processor() or platform.machine(), "reps": args.reps,
              "load_average_start": os.getloadavg()[0], "cases": []}
    print(f"torch {torch.__version__}, {args.threads} thread(s) for torch and posenc, posenc kernel "
          f"{posenc.kernel_target()}, {args.reps} interleaved repetitions (best / median per call), "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'case':22} {'variant':16} {'best':>11} {'median':>11}")
    for seq in (int(v) for v in args.seq.split(",")):
        for dtype in (torch.float32, torch.bfloat16):
            r = run_case(seq, dtype, args.reps)
            report["cases"].append(r)
            name = f"{seq}x32x128 {r['dtype']}"
            for variant, t in r["timings"].items():
                print(f"{name:22} {variant:16} {t['best_s'] * 1e6:9.1f}us {t['median_s'] * 1e6:9.1f}us")
            line = f"{name:22} posenc/HF speedup: forward {r['speedup_fwd']:.1f}x, fwd+bwd {r['speedup_fwd_bwd']:.1f}x"
            if "python_overhead_s" in r:
                line += f"; Python-call overhead (posenc_fwd - cxx_rotation) {r['python_overhead_s'] * 1e6:.2f}us"
            print(line)
    report["load_average_end"] = os.getloadavg()[0]
    print(f"load average at the end {report['load_average_end']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
