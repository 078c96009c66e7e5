#!/usr/bin/env python3
"""JAX's side of scripts/gpu-check.sh: the same measurements as the cujax commands beside them,
on the same GPU, printed as RESULT lines (common.py) for bench/table.py.

    bench.py train --config tiny --batches B.npy [--dtypes bfloat16,float32]
        Optax AdamW with the warm-up cosine schedule and clipping of `cujax train`
        (models::make_optimizer) on the batches `cujax train --dump-batches B.npy` wrote:
        tokens/s, MFU (bf16 peak), cold compile seconds, first and last loss, peak memory.
    bench.py attention [--seq 1024,4096]     jax.nn.dot_product_attention, causal bf16, head
        dim 128, implementation xla and cudnn, TFLOP/s (as `cujax bench attention`).
    bench.py decode [--config small] [--batches 1,8]   a KV-cache decode step, ms per step
        (= per output token of each sequence), float32 as cujax.
    bench.py dispatch                        a jitted f32[1] x + 1: round trip and dispatch µs
        (as `cujax bench dispatch`).

Each measurement is a stage: a failure prints an ERROR line and the others still run.
"""
import argparse
import os
import sys
import time

# Memory as used, not a preallocated pool: peak figures must mean something.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (CONFIGS, median, parameter_count, peak_tflops, result, stage,  # noqa: E402
                    train_flops_per_token)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import model as lm  # noqa: E402


def device():
    return jax.devices()[0]


def peak_memory_mib():
    stats = device().memory_stats() or {}
    peak = stats.get("peak_bytes_in_use")
    return None if peak is None else peak / 2**20


# ---- training ----

def make_optimizer(lr, warmup, total):
    """models::make_optimizer: clip_by_global_norm(1) then adamw(warmup_cosine_decay(0 -> lr
    over `warmup` steps, cosine to lr/10 at `total`), b1 0.9, b2 0.95, eps 1e-8, weight decay
    0.1 on parameters of rank >= 2 only)."""
    warmup = max(0, min(warmup, total - 1))
    schedule = optax.warmup_cosine_decay_schedule(0.0, lr, warmup, max(total, 1), lr * 0.1)
    mask = lambda p: jax.tree_util.tree_map(lambda x: x.ndim >= 2, p)  # noqa: E731
    return optax.chain(optax.clip_by_global_norm(1.0),
                       optax.adamw(schedule, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.1,
                                   mask=mask))


def make_train_step(rebuild, tx):
    def loss_fn(params, inputs, targets):
        logits = rebuild(params)(inputs)
        return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()

    def step(params, opt_state, inputs, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, inputs, targets)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return jax.jit(step, donate_argnums=(0, 1))


def train_one(name, config, batches, dtype_name, lr, warmup, peak):
    dtype = {"bfloat16": jnp.bfloat16, "float32": None}[dtype_name]
    steps, _, batch, seq = batches.shape
    model = lm.make(config, seed=0, dtype=dtype)
    rebuild, params, _ = lm.split_params(model)  # params: {path: array}, as cujax's State
    tx = make_optimizer(lr, warmup, steps)
    opt_state = tx.init(params)
    step = make_train_step(rebuild, tx)
    data = [(jax.device_put(batches[i, 0]), jax.device_put(batches[i, 1])) for i in range(steps)]

    t0 = time.perf_counter()
    compiled = step.lower(params, opt_state, *data[0]).compile()
    compile_s = time.perf_counter() - t0
    losses = []
    params, opt_state, loss = compiled(params, opt_state, *data[0])  # warm-up, not timed
    losses.append(loss)
    loss.block_until_ready()
    t0 = time.perf_counter()
    for inputs, targets in data[1:]:
        params, opt_state, loss = compiled(params, opt_state, inputs, targets)
        losses.append(loss)
    loss.block_until_ready()
    elapsed = time.perf_counter() - t0
    tokens_per_s = (steps - 1) * batch * seq / elapsed
    key = f"jax.train.{name}.{dtype_name}"
    result(f"{key}.tokens_per_s", tokens_per_s, "tokens/s")
    result(f"{key}.compile_s", compile_s, "s")
    result(f"{key}.loss_first", float(losses[0]), "nats")
    result(f"{key}.loss_last", float(losses[-1]), "nats")
    if peak:
        mfu = tokens_per_s * train_flops_per_token(config, seq) / (peak * 1e12)
        result(f"{key}.mfu", 100 * mfu, "%")


def cmd_train(a):
    config = CONFIGS[a.config]
    batches = np.load(a.batches).astype(np.int32)
    if batches.ndim != 4 or batches.shape[1] != 2:
        raise SystemExit(f"{a.batches}: expected (steps, 2, batch, seq), got {batches.shape}")
    steps, _, batch, seq = batches.shape
    peak = peak_tflops(device().device_kind, a.peak_tflops)
    print(f"jax {jax.__version__} on {device().device_kind}: config {a.config} "
          f"({parameter_count(config)} parameters), {steps} steps of {batch} x {seq} tokens, "
          f"bf16 peak {peak} TFLOP/s", flush=True)
    warmup = a.warmup if a.warmup is not None else min(100, steps // 10)
    for dtype_name in a.dtypes.split(","):
        stage(f"train {a.config} {dtype_name}", train_one, a.config, config, batches,
              dtype_name, a.lr, warmup, peak)
    mib = peak_memory_mib()
    if mib is not None:
        result(f"jax.train.{a.config}.peak_mib", mib, "MiB")


# ---- attention ----

def attention_one(seq, implementation, heads):
    batch = max(1, 16384 // seq)
    shape = (batch, seq, heads, 128)
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    q, k, v = (jax.random.normal(key, shape, jnp.bfloat16) for key in keys)
    f = jax.jit(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True,
                                                            implementation=implementation))
    f(q, k, v).block_until_ready()
    f(q, k, v).block_until_ready()
    ms = []
    for _ in range(10):
        t0 = time.perf_counter()
        f(q, k, v).block_until_ready()
        ms.append((time.perf_counter() - t0) * 1e3)
    flop = 2.0 * batch * heads * 128 * seq * seq  # causal: half of 4 B N T^2 H
    tflops = flop / median(ms) / 1e9
    print(f"T={seq} B={batch} {implementation}: {median(ms):.3f} ms {tflops:.1f} TFLOP/s")
    result(f"jax.attention.{implementation}.T{seq}", tflops, "TFLOP/s")


def cmd_attention(a):
    for seq in (int(s) for s in a.seq.split(",")):
        for implementation in ("xla", "cudnn"):
            stage(f"attention {implementation} T={seq}", attention_one, seq, implementation,
                  a.heads)


# ---- decode ----

def decode_one(config, batch, tokens):
    model = lm.make(config, seed=0)
    cache = model.init_cache(batch)
    rebuild, params, _ = lm.split_params(model)

    def step(params, cache, tokens, position):
        logits, cache = rebuild(params).decode_step(cache, tokens, position)
        return jnp.argmax(logits, -1).astype(jnp.int32)[:, None], cache

    jstep = jax.jit(step, donate_argnums=(1,))
    x = jnp.zeros((batch, 1), jnp.int32)
    positions = [jnp.asarray(p, jnp.int32) for p in range(tokens + 1)]
    x, cache = jstep(params, cache, x, positions[0])  # compiles
    x.block_until_ready()
    t0 = time.perf_counter()
    for p in positions[1:]:
        x, cache = jstep(params, cache, x, p)
    x.block_until_ready()
    ms = (time.perf_counter() - t0) * 1e3 / tokens
    print(f"decode {config['name']} batch {batch}: {ms:.3f} ms per step")
    result(f"jax.decode.{config['name']}.b{batch}", ms, "ms/token")


def cmd_decode(a):
    config = CONFIGS[a.config]
    tokens = min(64, config["max_len"] - 1)
    for batch in (int(b) for b in a.batches.split(",")):
        stage(f"decode batch {batch}", decode_one, config, batch, tokens)


# ---- dispatch ----

def cmd_dispatch(_):
    def run():
        x = jnp.ones((1,), jnp.float32)
        t0 = time.perf_counter()
        f = jax.jit(lambda x: x + 1.0)
        f.lower(x).compile()
        result("jax.dispatch.compile_s", time.perf_counter() - t0, "s")
        f(x).block_until_ready()
        roundtrip, queued = [], []
        for _ in range(7):
            n = 2000
            t0 = time.perf_counter()
            for _ in range(n):
                f(x).block_until_ready()
            roundtrip.append((time.perf_counter() - t0) / n * 1e6)
            t0 = time.perf_counter()
            for _ in range(n):
                y = f(x)
            queued.append((time.perf_counter() - t0) / n * 1e6)
            y.block_until_ready()
        result("jax.dispatch.roundtrip_us", median(roundtrip), "us")
        result("jax.dispatch.async_us", median(queued), "us")
    stage("dispatch", run)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train")
    t.add_argument("--config", choices=sorted(CONFIGS), required=True)
    t.add_argument("--batches", required=True)
    t.add_argument("--dtypes", default="bfloat16,float32")
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--warmup", type=int, default=None)
    t.add_argument("--peak-tflops", type=float, default=None)
    at = sub.add_parser("attention")
    at.add_argument("--seq", default="1024,4096")
    at.add_argument("--heads", type=int, default=16)
    d = sub.add_parser("decode")
    d.add_argument("--config", choices=sorted(CONFIGS), default="small")
    d.add_argument("--batches", default="1,8")
    sub.add_parser("dispatch")
    a = p.parse_args()
    print(f"jax {jax.__version__}, devices {jax.devices()}", flush=True)
    {"train": cmd_train, "attention": cmd_attention, "decode": cmd_decode,
     "dispatch": cmd_dispatch}[a.command](a)


if __name__ == "__main__":
    main()
