#!/usr/bin/python3
"""Test-time oracle for posenc's training code: the same model, layers and optimizer written in plain PyTorch
(float64, autograd), run on weights, tokens and RoPE tables that the C++ test writes to a temporary folder.

Usage: /usr/bin/python3 tests/train/torch_oracle.py JOB_DIR
JOB_DIR/job.json: {"cases": [case, ...]}; arrays are raw little-endian files in JOB_DIR ("f64" float64, "i32"
int32), named in the case. Writes JOB_DIR/results.json: {"torch": version, "results": {case name: result}} and,
for layer cases, the gradients as float64 files named in the result. Prints {"skipped": reason} and exits 0 when
torch cannot be imported (Debian: apt install python3-torch; run with /usr/bin/python3).

Case kinds:
  "train": config (posenc TrainShape keys), layout [{name, offset, shape}], params (f64 file, flat), inputs /
    targets (i32 [batch, ctx]), rope (optional: half, layout "interleaved" | "half-split", softmax_scale_multiplier,
    cos / sin f64 files [ctx, ctx, half]: entry (p, j) rotates key j for query row p; (p, p) rotates q_p), adamw
    {beta1, beta2, eps, weight_decay}, schedule {max_lr, min_lr, warmup_steps, total_steps}, grad_clip, steps.
    Result: {"losses": [loss before step 0, ..., loss after the last step], "grad_norms": [...]}.
  "attention": batch, ctx, n_heads, n_kv_heads, head_dim, rope (as above, may be absent), qkv (f64 [batch, ctx,
    (H + 2G) D]), dout (f64 [batch, ctx, H D]). Result: {"out": file, "dqkv": file}.
  "classifier_loss": n, dim, vocab, x (f64 [n, dim]), w (f64 [vocab, dim]), targets (i32 [n], -1 ignored).
    Result: {"loss": value, "dx": file, "dw": file}.

The model (pre-norm Llama block, as HF's LlamaDecoderLayer written out): RMSNorm with the config's eps, q/k/v
projections (+ biases), RoPE (pairs (2i, 2i+1) interleaved or HF's rotate_half for half-split; channels past
2 * half untouched), GQA by repeat_interleave, causal masked softmax with scale multiplier / sqrt(head_dim), output
projection, SwiGLU feed-forward, final RMSNorm, classifier (tied: the embedding Parameter itself), mean
cross-entropy with ignore_index=-1. Positions: sinusoidal = Vaswani et al. Sec. 3.5 interleaved [sin, cos] pairs,
omega_i = 10000^(-2i/dim), computed in float64 and rounded to float32 (the model stores the table in float32);
learned = the position_embd.weight Parameter rows 0..ctx-1. Optimizer: torch.optim.AdamW with decay on tensors of
rank >= 2 only, the learning rate of each step set from the warm-up + cosine schedule (computed here), then
torch.nn.utils.clip_grad_norm_ before each step.
"""
import json
import math
import os
import sys


def main():
    try:
        import numpy as np
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means: no oracle
        print(json.dumps({"skipped": f"python3-torch is not importable by {sys.executable}: {e}"}))
        return 0

    torch.set_num_threads(1)
    job_dir = sys.argv[1]
    with open(os.path.join(job_dir, "job.json")) as f:
        job = json.load(f)

    def f64(name, shape):
        return torch.from_numpy(np.fromfile(os.path.join(job_dir, name), dtype="<f8").reshape(shape).copy())

    def i32(name, shape):
        return torch.from_numpy(np.fromfile(os.path.join(job_dir, name), dtype="<i4").astype(np.int64).reshape(shape))

    def save(name, t):
        t.detach().numpy().astype("<f8").tofile(os.path.join(job_dir, name))
        return name

    def rope_tables(rope, ctx):
        if not rope:
            return None
        h = rope["half"]
        return (f64(rope["cos"], (ctx, ctx, h)), f64(rope["sin"], (ctx, ctx, h)), h, rope["layout"])

    def rotate(x, c, s, half, layout):
        # x [..., D]; c, s broadcastable to [..., half]. Pairs (2i, 2i+1) interleaved, (i, i + half) half-split.
        rot, rest = x[..., : 2 * half], x[..., 2 * half:]
        if layout == "interleaved":
            a, b = rot[..., 0::2], rot[..., 1::2]
            out = torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)
        else:  # HF rotate_half: x * cat(c, c) + rotate_half(x) * cat(s, s)
            cc, ss = torch.cat((c, c), dim=-1), torch.cat((s, s), dim=-1)
            x1, x2 = rot[..., :half], rot[..., half:]
            out = rot * cc + torch.cat((-x2, x1), dim=-1) * ss
        return torch.cat((out, rest.expand(*out.shape[:-1], rest.shape[-1])), dim=-1)

    def attention(qkv, B, T, H, G, D, tables, multiplier):
        # qkv [B, T, (H + 2G) D] -> [B, T, H D]
        q = qkv[..., : H * D].reshape(B, T, H, D).transpose(1, 2)             # [B, H, T, D]
        k = qkv[..., H * D:(H + G) * D].reshape(B, T, G, D).transpose(1, 2)  # [B, G, T, D]
        v = qkv[..., (H + G) * D:].reshape(B, T, G, D).transpose(1, 2)
        k = k.repeat_interleave(H // G, dim=1)                                # GQA
        v = v.repeat_interleave(H // G, dim=1)
        scale = multiplier / math.sqrt(D)
        if tables is None:
            scores = q @ k.transpose(-1, -2) * scale
        else:
            cos, sin, half, layout = tables                                   # [T(p), T(j), half]
            idx = torch.arange(T)
            qr = rotate(q, cos[idx, idx], sin[idx, idx], half, layout)        # q_p rotated by (p, p)
            kr = rotate(k.unsqueeze(2), cos, sin, half, layout)              # [B, H, T(p), T(j), D]
            scores = torch.einsum("bhpd,bhpjd->bhpj", qr, kr) * scale
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(mask, float("-inf"))
        p = torch.softmax(scores, dim=-1)
        return (p @ v).transpose(1, 2).reshape(B, T, H * D)

    def rmsnorm(x, w, eps):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    results = {}
    for case in job["cases"]:
        kind = case["kind"]
        if kind == "attention":
            B, T, H, G, D = case["batch"], case["ctx"], case["n_heads"], case["n_kv_heads"], case["head_dim"]
            qkv = f64(case["qkv"], (B, T, (H + 2 * G) * D)).requires_grad_(True)
            dout = f64(case["dout"], (B, T, H * D))
            rope = case.get("rope")
            out = attention(qkv, B, T, H, G, D, rope_tables(rope, T), rope["softmax_scale_multiplier"] if rope else 1.0)
            out.backward(dout)
            results[case["name"]] = {"out": save(case["name"] + "_out.f64", out),
                                     "dqkv": save(case["name"] + "_dqkv.f64", qkv.grad)}
        elif kind == "classifier_loss":
            n, dim, V = case["n"], case["dim"], case["vocab"]
            x = f64(case["x"], (n, dim)).requires_grad_(True)
            w = f64(case["w"], (V, dim)).requires_grad_(True)
            targets = i32(case["targets"], (n,))
            loss = torch.nn.functional.cross_entropy(x @ w.T, targets, ignore_index=-1)
            loss.backward()
            results[case["name"]] = {"loss": loss.item(), "dx": save(case["name"] + "_dx.f64", x.grad),
                                     "dw": save(case["name"] + "_dw.f64", w.grad)}
        elif kind == "train":
            results[case["name"]] = train(case, f64, i32, attention, rmsnorm, rope_tables, torch)
        else:
            raise ValueError(f"unknown case kind {kind}")
    with open(os.path.join(job_dir, "results.json"), "w") as f:
        json.dump({"torch": torch.__version__, "results": results}, f)
    print(json.dumps({"torch": torch.__version__, "cases": len(results)}))
    return 0


def train(case, f64, i32, attention, rmsnorm, rope_tables, torch):
    c = case["config"]
    C, F, V, L = c["dim"], c["hidden_dim"], c["vocab_size"], c["n_layers"]
    H, G = c["n_heads"], c["n_kv_heads"]
    D = c["head_dim"] or C // H
    Q, K = H * D, G * D
    B, T = case["batch"], case["ctx"]
    flat = f64(case["params"], (-1,))
    params = {}
    for t in case["layout"]:
        n = math.prod(t["shape"])
        params[t["name"]] = torch.nn.Parameter(flat[t["offset"]:t["offset"] + n].reshape(t["shape"]).clone())
    inputs = i32(case["inputs"], (B, T))
    targets = i32(case["targets"], (B * T,))
    rope = case.get("rope")
    tables = rope_tables(rope, T)
    multiplier = rope["softmax_scale_multiplier"] if rope else 1.0
    pe = c["position_encoding"]
    if pe == "sinusoidal":
        pos = torch.arange(T, dtype=torch.float64)[:, None]
        omega = 10000.0 ** (-torch.arange(C // 2, dtype=torch.float64) * 2 / C)
        table = torch.stack((torch.sin(pos * omega), torch.cos(pos * omega)), dim=-1).flatten(-2)
        table = table.float().double()
    output = params["token_embd.weight"] if c["tied_embeddings"] else params["output.weight"]

    def forward():
        x = params["token_embd.weight"][inputs]
        if pe == "sinusoidal":
            x = x + table
        elif pe == "learned":
            x = x + params["position_embd.weight"][:T]
        for l in range(L):
            p = lambda name: params[f"blk.{l}.{name}"]  # noqa: E731
            h = rmsnorm(x, p("attn_norm.weight"), c["norm_eps"])
            qkv = torch.cat((h @ p("attn_q.weight").T, h @ p("attn_k.weight").T, h @ p("attn_v.weight").T), dim=-1)
            if c["attention_bias"]:
                qkv = qkv + torch.cat((p("attn_q.bias"), p("attn_k.bias"), p("attn_v.bias")))
            x = x + attention(qkv, B, T, H, G, D, tables, multiplier) @ p("attn_output.weight").T
            h = rmsnorm(x, p("ffn_norm.weight"), c["norm_eps"])
            x = x + (torch.nn.functional.silu(h @ p("ffn_gate.weight").T) * (h @ p("ffn_up.weight").T)) @ p("ffn_down.weight").T
        h = rmsnorm(x, params["output_norm.weight"], c["norm_eps"])
        logits = (h @ output.T).reshape(B * T, V)
        return torch.nn.functional.cross_entropy(logits, targets, ignore_index=-1)

    a = case["adamw"]
    decay = [t for t in params.values() if t.dim() >= 2]
    no_decay = [t for t in params.values() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1.0, betas=(a["beta1"], a["beta2"]), eps=a["eps"], foreach=False)
    s = case["schedule"]

    def lr_at(step):
        if step < s["warmup_steps"]:
            return s["max_lr"] * (step + 1) / s["warmup_steps"]
        if step >= s["total_steps"]:
            return s["min_lr"]
        ratio = (step - s["warmup_steps"]) / (s["total_steps"] - s["warmup_steps"])
        return s["min_lr"] + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (s["max_lr"] - s["min_lr"])

    losses, norms = [], []
    for step in range(case["steps"]):
        opt.zero_grad()
        loss = forward()
        losses.append(loss.item())
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(list(params.values()), case["grad_clip"]).item())
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        opt.step()
    with torch.no_grad():
        losses.append(forward().item())
    return {"losses": losses, "grad_norms": norms}


if __name__ == "__main__":
    sys.exit(main())
