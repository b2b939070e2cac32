#!/usr/bin/python3
"""PyTorch baseline for `posenc bench`: Hugging Face's RoPE formulation, timed on posenc's shapes.

Usage: /usr/bin/python3 bench/torch_rope_baseline.py CASES.json
CASES.json: {"threads": N, "reps": R, "cases": [{"name", "n_tokens", "n_heads", "k_heads", "head_dim",
"rotary_dim", "dtype" ("float32" | "bfloat16"), "cold"}]} (written by posenc bench).
Prints one JSON line: {"torch": version, "results": [{"name", "seconds" (best call), "seconds_median"}],
"errors": [...]}, or
{"skipped": reason} when torch cannot be imported (Debian: apt install python3-torch; use /usr/bin/python3).

The timed code is transformers' `rotate_half` + `apply_rotary_pos_emb` (Llama, v4.3x-v5) on tensors in HF's
layout [batch=1, heads, seq, head_dim], cos/sin [1, seq, rotary_dim] in the tensor's dtype (as
LlamaRotaryEmbedding returns them; built once per forward, so not timed). Partial rotary follows GPT-NeoX:
split off x[..., rotary_dim:], rotate the rest, torch.cat back. Q-only cases time the q line; QK cases both.
Each case's result is checked once against a float64 evaluation before timing. Cold cases evict the caches
(128 MiB read-modify-write) before each timed call, as posenc bench does for its own kernels.
"""
import json
import statistics
import sys
import time


def main():
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means: no baseline
        print(json.dumps({"skipped": f"python3-torch is not importable by {sys.executable}: {e}"}))
        return 0

    with open(sys.argv[1]) as f:
        spec = json.load(f)
    torch.set_num_threads(int(spec["threads"]))
    reps = int(spec["reps"])
    flush = torch.ones(32 << 20, dtype=torch.float32)

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def rope(x, cos, sin, rotary_dim):
        # cos/sin: [1, 1, seq, rotary_dim] (already unsqueezed at dim 1, as apply_rotary_pos_emb does)
        if rotary_dim == x.shape[-1]:
            return (x * cos) + (rotate_half(x) * sin)
        x_rot, x_pass = x[..., :rotary_dim], x[..., rotary_dim:]
        x_embed = (x_rot * cos) + (rotate_half(x_rot) * sin)
        return torch.cat((x_embed, x_pass), dim=-1)

    results, errors = [], []
    for c in spec["cases"]:
        dtype = torch.float32 if c["dtype"] == "float32" else torch.bfloat16
        n, h, kh, d, r = c["n_tokens"], c["n_heads"], c["k_heads"], c["head_dim"], c["rotary_dim"]
        g = torch.Generator().manual_seed(1)
        q = (torch.rand(1, h, n, d, generator=g) * 2 - 1).to(dtype)
        k = (torch.rand(1, kh, n, d, generator=g) * 2 - 1).to(dtype) if kh > 0 else None
        pos = torch.arange(n, dtype=torch.float32) if n > 1 else torch.tensor([4095.0])
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, r, 2, dtype=torch.int64).float() / r))
        freqs = pos[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)[None]  # [1, seq, rotary_dim]
        cos = emb.cos().to(dtype).unsqueeze(1)
        sin = emb.sin().to(dtype).unsqueeze(1)

        def call():
            qe = rope(q, cos, sin, r)
            ke = rope(k, cos, sin, r) if k is not None else None
            return qe, ke

        # Check once against float64.
        qe, _ = call()
        ref = rope(q.double(), cos.double(), sin.double(), r)
        tol = 1e-5 if dtype == torch.float32 else 3 * 2.0 ** -8
        err = (qe.double() - ref).abs().max().item()
        if not err <= tol:
            errors.append(f"{c['name']}: max |torch - float64| = {err} > {tol}; not timed")
            continue

        times = []
        if c["cold"]:
            call()
            for _ in range(reps):
                flush.mul_(0.5).add_(0.5)
                t0 = time.perf_counter()
                call()
                times.append(time.perf_counter() - t0)
        else:
            batch = 1
            while True:
                t0 = time.perf_counter()
                for _ in range(batch):
                    call()
                if time.perf_counter() - t0 > 2e-3 or batch > (1 << 20):
                    break
                batch *= 2
            for _ in range(reps):
                t0 = time.perf_counter()
                for _ in range(batch):
                    call()
                times.append((time.perf_counter() - t0) / batch)
        # Best call (as posenc bench reports its own kernels), median kept for reference.
        results.append({"name": c["name"], "seconds": min(times), "seconds_median": statistics.median(times)})

    print()
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "results": results,
                      "errors": errors}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
