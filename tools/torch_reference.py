"""cujax's TransformerLM written with PyTorch ops: the peer of its tests and benchmarks.

  torch_reference.py step DIR
      tests/transformer_test.cpp: DIR holds config.json, params/<path>.npy, inputs.npy and
      targets.npy; writes the loss and gradients in f64 (loss.npy, grads/<path>.npy) and the
      parameters after one optimizer step (stepped/<path>.npy): clip_by_global_norm, then AdamW
      with decay on parameters of rank >= 2, as cujax's models::make_optimizer without warmup.
  torch_reference.py bench CONFIG_JSON BATCH SEQ STEPS THREADS
      `cujax bench train`: the same model and training step in f32 on the CPU; prints the
      median ms per step.
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch


def layer_norm(x, scale, bias, eps=1e-6):
    # Flax's fast variance: E[x^2] - E[x]^2.
    mean = x.mean(-1, keepdim=True)
    var = torch.clamp((x * x).mean(-1, keepdim=True) - mean * mean, min=0)
    return (x - mean) / torch.sqrt(var + eps) * scale + bias


def gelu(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def forward(p, cfg, tokens):
    t = tokens.shape[1]
    x = p["embed.embedding"][tokens] + p["pos_embed.embedding"][:t]
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool))
    for i in range(cfg["num_layers"]):
        b = f"blocks.{i}."
        h = layer_norm(x, p[b + "ln1.scale"], p[b + "ln1.bias"])
        q, k, v = (torch.einsum("btd,dnh->btnh", h, p[b + f"attn.{n}.kernel"]) +
                   p[b + f"attn.{n}.bias"] for n in ("query", "key", "value"))
        logits = torch.einsum("btnh,bsnh->bnts", q, k) / math.sqrt(q.shape[-1])
        logits = logits.masked_fill(~causal, float("-inf"))
        a = torch.einsum("bnts,bsnh->btnh", torch.softmax(logits, -1), v)
        x = x + torch.einsum("btnh,nhd->btd", a, p[b + "attn.out.kernel"]) + p[b + "attn.out.bias"]
        h = layer_norm(x, p[b + "ln2.scale"], p[b + "ln2.bias"])
        h = gelu(h @ p[b + "mlp.fc.kernel"] + p[b + "mlp.fc.bias"])
        x = x + h @ p[b + "mlp.proj.kernel"] + p[b + "mlp.proj.bias"]
    x = layer_norm(x, p["ln_f.scale"], p["ln_f.bias"])
    return x @ p["embed.embedding"].T


def step(d):
    torch.set_default_dtype(torch.float64)
    cfg = json.load(open(os.path.join(d, "config.json")))
    names = [f[:-4] for f in sorted(os.listdir(os.path.join(d, "params")))]
    p = {n: torch.tensor(np.load(os.path.join(d, "params", n + ".npy")).astype(np.float64),
                         requires_grad=True) for n in names}
    inputs = torch.tensor(np.load(os.path.join(d, "inputs.npy")).astype(np.int64))
    targets = torch.tensor(np.load(os.path.join(d, "targets.npy")).astype(np.int64))
    logits = forward(p, cfg, inputs)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             targets.reshape(-1))
    loss.backward()
    np.save(os.path.join(d, "loss.npy"), np.array(loss.item()))
    os.makedirs(os.path.join(d, "grads"), exist_ok=True)
    for n in names:
        np.save(os.path.join(d, "grads", n + ".npy"), p[n].grad.numpy())

    # Optax's clip_by_global_norm: scale by max_norm / norm when norm >= max_norm.
    opt = cfg["optimizer"]
    norm = math.sqrt(sum(float((p[n].grad ** 2).sum()) for n in names))
    clip = opt["clip_norm"] / norm if norm >= opt["clip_norm"] else 1.0
    with torch.no_grad():
        for n in names:
            p[n].grad *= clip
    decayed = [p[n] for n in names if p[n].dim() >= 2]
    plain = [p[n] for n in names if p[n].dim() < 2]
    adamw = torch.optim.AdamW(
        [{"params": decayed, "weight_decay": opt["weight_decay"]},
         {"params": plain, "weight_decay": 0.0}],
        lr=opt["learning_rate"], betas=(opt["b1"], opt["b2"]), eps=1e-8)
    adamw.step()
    os.makedirs(os.path.join(d, "stepped"), exist_ok=True)
    for n in names:
        np.save(os.path.join(d, "stepped", n + ".npy"), p[n].detach().numpy())


def init_params(cfg):
    d, f, n = cfg["d_model"], cfg["d_ff"], cfg["num_heads"]
    h = d // n
    shapes = {"embed.embedding": (cfg["vocab_size"], d), "pos_embed.embedding": (cfg["max_len"], d),
              "ln_f.scale": (d,), "ln_f.bias": (d,)}
    for i in range(cfg["num_layers"]):
        b = f"blocks.{i}."
        for ln in ("ln1", "ln2"):
            shapes[b + ln + ".scale"] = (d,)
            shapes[b + ln + ".bias"] = (d,)
        for name in ("query", "key", "value"):
            shapes[b + f"attn.{name}.kernel"] = (d, n, h)
            shapes[b + f"attn.{name}.bias"] = (n, h)
        shapes[b + "attn.out.kernel"] = (n, h, d)
        shapes[b + "attn.out.bias"] = (d,)
        shapes[b + "mlp.fc.kernel"] = (d, f)
        shapes[b + "mlp.fc.bias"] = (f,)
        shapes[b + "mlp.proj.kernel"] = (f, d)
        shapes[b + "mlp.proj.bias"] = (d,)
    return {k: torch.nn.Parameter(torch.randn(s) * 0.02) for k, s in shapes.items()}


def bench(config_json, batch, seq, steps, threads):
    torch.set_num_threads(threads)
    cfg = json.loads(config_json)
    p = init_params(cfg)
    decayed = [v for v in p.values() if v.dim() >= 2]
    plain = [v for v in p.values() if v.dim() < 2]
    opt = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.1},
                             {"params": plain, "weight_decay": 0.0}], lr=1e-3, betas=(0.9, 0.95))
    window = torch.randint(0, cfg["vocab_size"], (batch, seq + 1))
    inputs, targets = window[:, :-1], window[:, 1:]
    times = []
    for i in range(steps + 3):
        t = time.perf_counter()
        logits = forward(p, cfg, inputs)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 targets.reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0)
        opt.step()
        if i >= 3:  # warm-up steps are not timed
            times.append(time.perf_counter() - t)
    times.sort()
    print(f"{times[len(times) // 2] * 1e3:.3f}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "step":
        step(sys.argv[2])
    elif len(sys.argv) == 7 and sys.argv[1] == "bench":
        bench(sys.argv[2], *map(int, sys.argv[3:]))
    else:
        sys.exit(__doc__)
