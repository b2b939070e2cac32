#!/usr/bin/env python3
"""PyTorch baseline of the prefill benchmark (bench/prefill_bench.sh): the forward pass of one window of a
Llama-family shape with random weights, as Hugging Face's LlamaForCausalLM computes it (RMSNorm, rotate_half RoPE,
grouped-query attention with a causal mask and a float32 softmax, SwiGLU MLP, classifier), in bf16 or f32, on
Debian's torch (its CPU matmuls go through oneDNN / its BLAS). Prints the best time of REPS windows and tokens/s.

usage: torch_prefill_baseline.py SHAPE DTYPE CTX THREADS [REPS]
  SHAPE tinyllama | 7b-width-4l; DTYPE bf16 | f32
"""
import sys
import time

import torch
import torch.nn.functional as F

SHAPES = {  # dim, layers, heads, kv heads, ffn, vocab
    "tinyllama": (2048, 22, 32, 4, 5632, 32000),
    "7b-width-4l": (4096, 4, 32, 32, 11008, 32000),
}


def rms_norm(x, w, eps=1e-5):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def main():
    shape, dtype_name, ctx, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    reps = int(sys.argv[5]) if len(sys.argv) > 5 else 2
    dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype_name]
    torch.set_num_threads(threads)
    dim, n_layers, n_heads, n_kv, ffn, vocab = SHAPES[shape]
    hd = dim // n_heads
    g = torch.Generator().manual_seed(0)

    def w(*s):
        return (torch.rand(*s, generator=g) * 2 - 1).mul_(0.02 * 3 ** 0.5).to(dtype)

    layers = [dict(q=w(dim, dim), k=w(n_kv * hd, dim), v=w(n_kv * hd, dim), o=w(dim, dim), gate=w(ffn, dim),
                   up=w(ffn, dim), down=w(dim, ffn), n1=torch.ones(dim, dtype=dtype), n2=torch.ones(dim, dtype=dtype))
              for _ in range(n_layers)]
    emb, out, norm = w(vocab, dim), w(vocab, dim), torch.ones(dim, dtype=dtype)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
    freqs = torch.outer(torch.arange(ctx).float(), inv_freq)
    e = torch.cat((freqs, freqs), dim=-1)
    cos, sin = e.cos().to(dtype), e.sin().to(dtype)
    mask = torch.full((ctx, ctx), float("-inf")).triu(1)
    tokens = torch.randint(0, 512, (ctx,), generator=g)

    def forward():
        x = emb[tokens]
        for l in layers:
            h = rms_norm(x, l["n1"])
            q = F.linear(h, l["q"]).view(ctx, n_heads, hd).transpose(0, 1)
            k = F.linear(h, l["k"]).view(ctx, n_kv, hd).transpose(0, 1)
            v = F.linear(h, l["v"]).view(ctx, n_kv, hd).transpose(0, 1)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k = k.repeat_interleave(n_heads // n_kv, dim=0)
            v = v.repeat_interleave(n_heads // n_kv, dim=0)
            s = torch.matmul(q, k.transpose(1, 2)) / hd ** 0.5 + mask.to(dtype)
            p = F.softmax(s, dim=-1, dtype=torch.float32).to(dtype)
            a = torch.matmul(p, v).transpose(0, 1).reshape(ctx, dim)
            x = x + F.linear(a, l["o"])
            h = rms_norm(x, l["n2"])
            x = x + F.linear(F.silu(F.linear(h, l["gate"])) * F.linear(h, l["up"]), l["down"])
        return F.linear(rms_norm(x, norm), out)

    best = float("inf")
    with torch.inference_mode():
        for _ in range(reps):
            t0 = time.perf_counter()
            logits = forward()
            best = min(best, time.perf_counter() - t0)
    assert torch.isfinite(logits.float()).all()
    print(f"torch {torch.__version__} {shape} {dtype_name} ctx {ctx} threads {threads}: best {best:.2f} s per window, "
          f"{ctx / best:.1f} tokens/s")


if __name__ == "__main__":
    main()
