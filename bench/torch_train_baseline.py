#!/usr/bin/python3
"""PyTorch baseline for `posenc bench --filter train`: one training step of a Llama-shaped model written plainly in
torch, timed on the same shapes, threads and batch as posenc's training step.

Usage: /usr/bin/python3 bench/torch_train_baseline.py CASES.json
CASES.json: {"threads": N, "reps": R, "cases": [{"name", "batch", "ctx", "dim", "hidden_dim", "n_layers",
"n_heads", "n_kv_heads", "vocab_size", "norm_eps", "lr", "grad_clip"}]} (written by posenc bench).
Prints one JSON line: {"torch": version, "threads": N, "results": [{"name", "seconds" (best step),
"seconds_median", "tokens_per_s" (from the best step), "peak_rss_mb", "loss"}], "errors": [...]}, or
{"skipped": reason} when torch cannot be imported (Debian: apt install python3-torch; use /usr/bin/python3).

The model is what a PyTorch user writes first, as Hugging Face's Llama code does it: RMSNorm, q/k/v/o projections
without bias, RoPE with `rotate_half` on [batch, heads, seq, head_dim] (cos/sin built once per forward), GQA by
`repeat_interleave` of k and v, scores q k^T / sqrt(head_dim) with the causal mask applied by `masked_fill(-inf)`,
softmax, SwiGLU feed-forward, final RMSNorm, classifier tied to the embedding, mean cross-entropy. One step =
zero_grad, forward, backward, clip_grad_norm_, torch.optim.AdamW step (float32). The first step is a warm-up and
is checked: its loss must be within 0.05 of log(vocab_size) (weights start at normal(0, 0.02)), else the case is
reported as an error and not timed. peak_rss_mb is the process's VmHWM after the case, reset before it through
/proc/self/clear_refs (so it counts torch's own libraries, as posenc's figure counts its own).
"""
import json
import math
import statistics
import sys
import time


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return -1.0


def main():
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001 - any import failure means: no baseline
        print(json.dumps({"skipped": f"python3-torch is not importable by {sys.executable}: {e}"}))
        return 0

    with open(sys.argv[1]) as f:
        spec = json.load(f)
    torch.set_num_threads(int(spec["threads"]))
    reps = int(spec["reps"])

    class RMSNorm(torch.nn.Module):
        def __init__(self, dim, eps):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(dim))
            self.eps = eps

        def forward(self, x):
            return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    class Block(torch.nn.Module):
        def __init__(self, c):
            super().__init__()
            self.h, self.g, self.d = c["n_heads"], c["n_kv_heads"], c["dim"] // c["n_heads"]
            dim, hidden = c["dim"], c["hidden_dim"]
            self.q_proj = torch.nn.Linear(dim, self.h * self.d, bias=False)
            self.k_proj = torch.nn.Linear(dim, self.g * self.d, bias=False)
            self.v_proj = torch.nn.Linear(dim, self.g * self.d, bias=False)
            self.o_proj = torch.nn.Linear(self.h * self.d, dim, bias=False)
            self.gate_proj = torch.nn.Linear(dim, hidden, bias=False)
            self.up_proj = torch.nn.Linear(dim, hidden, bias=False)
            self.down_proj = torch.nn.Linear(hidden, dim, bias=False)
            self.input_layernorm = RMSNorm(dim, c["norm_eps"])
            self.post_attention_layernorm = RMSNorm(dim, c["norm_eps"])

        def forward(self, x, cos, sin, mask):
            b, t, _ = x.shape
            h = self.input_layernorm(x)
            q = self.q_proj(h).view(b, t, self.h, self.d).transpose(1, 2)
            k = self.k_proj(h).view(b, t, self.g, self.d).transpose(1, 2)
            v = self.v_proj(h).view(b, t, self.g, self.d).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k = k.repeat_interleave(self.h // self.g, dim=1)
            v = v.repeat_interleave(self.h // self.g, dim=1)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.d)
            scores = scores.masked_fill(mask, float("-inf"))
            att = torch.softmax(scores, dim=-1) @ v
            x = x + self.o_proj(att.transpose(1, 2).reshape(b, t, self.h * self.d))
            h = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))

    class Model(torch.nn.Module):
        def __init__(self, c):
            super().__init__()
            self.embed_tokens = torch.nn.Embedding(c["vocab_size"], c["dim"])
            self.layers = torch.nn.ModuleList([Block(c) for _ in range(c["n_layers"])])
            self.norm = RMSNorm(c["dim"], c["norm_eps"])
            self.d = c["dim"] // c["n_heads"]
            for p in self.parameters():
                if p.dim() >= 2:
                    torch.nn.init.normal_(p, 0.0, 0.02)

        def forward(self, tokens, targets):
            t = tokens.shape[1]
            inv_freq = 1.0 / (10000.0 ** (torch.arange(0, self.d, 2, dtype=torch.int64).float() / self.d))
            freqs = torch.arange(t, dtype=torch.float32)[:, None] * inv_freq[None, :]
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos()[None, None], emb.sin()[None, None]
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
            x = self.embed_tokens(tokens)
            for layer in self.layers:
                x = layer(x, cos, sin, mask)
            logits = self.norm(x) @ self.embed_tokens.weight.T  # tied classifier
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    results, errors = [], []
    for c in spec["cases"]:
        reset_peak_rss()
        torch.manual_seed(1)
        model = Model(c)
        opt = torch.optim.AdamW(model.parameters(), lr=c["lr"])
        g = torch.Generator().manual_seed(2)
        data = torch.randint(0, c["vocab_size"], (c["batch"], c["ctx"] + 1), generator=g)
        tokens, targets = data[:, :-1], data[:, 1:]

        def step():
            opt.zero_grad(set_to_none=True)
            loss = model(tokens, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), c["grad_clip"])
            opt.step()
            return loss.item()

        first = step()
        if not abs(first - math.log(c["vocab_size"])) < 0.05:
            errors.append(f"{c['name']}: first loss {first} is not log(vocab_size) = {math.log(c['vocab_size'])}; "
                          "not timed")
            continue
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        tokens_per_step = c["batch"] * c["ctx"]
        results.append({"name": c["name"], "seconds": min(times), "seconds_median": statistics.median(times),
                        "tokens_per_s": tokens_per_step / min(times), "peak_rss_mb": peak_rss_mb(), "loss": first})
        del model, opt

    print()
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(), "results": results,
                      "errors": errors}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
