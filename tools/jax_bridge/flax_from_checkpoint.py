"""Restores a `cujax train` checkpoint into the equivalent Flax NNX model and compares its
logits with those `cujax run` computed from an artifact of `cujax export --fn forward`.

usage: flax_from_checkpoint.py RUN_DIR --tokens TOKENS.npy --logits LOGITS.npy [--atol A]

RUN_DIR is a `cujax train --out` folder (config.json and checkpoints/<step>/default). Needs
jax, flax (NNX) and orbax-checkpoint; not run on the machine cujax is developed on (no JAX).
"""
import argparse
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx


class Mlp(nnx.Module):
    def __init__(self, d, f, rngs):
        self.fc = nnx.Linear(d, f, rngs=rngs)
        self.proj = nnx.Linear(f, d, rngs=rngs)

    def __call__(self, x):
        return self.proj(nnx.gelu(self.fc(x)))


def causal_attention(q, k, v, bias=None, mask=None, **kwargs):
    return jax.nn.dot_product_attention(q, k, v, bias=bias, mask=mask,
                                        is_causal=q.shape[1] == k.shape[1])


class Block(nnx.Module):
    def __init__(self, c, rngs):
        d = c["d_model"]
        self.ln1 = nnx.LayerNorm(d, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(c["num_heads"], d, attention_fn=causal_attention,
                                           decode=False, rngs=rngs)
        self.ln2 = nnx.LayerNorm(d, rngs=rngs)
        self.mlp = Mlp(d, c["d_ff"], rngs)

    def __call__(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TransformerLM(nnx.Module):
    """cujax's models::TransformerLM: same module names, so the same parameter paths."""

    def __init__(self, c, rngs):
        self.embed = nnx.Embed(c["vocab_size"], c["d_model"], rngs=rngs)
        self.pos_embed = nnx.Embed(c["max_len"], c["d_model"], rngs=rngs)
        self.blocks = nnx.List([Block(c, rngs) for _ in range(c["num_layers"])]) \
            if hasattr(nnx, "List") else [Block(c, rngs) for _ in range(c["num_layers"])]
        self.ln_f = nnx.LayerNorm(c["d_model"], rngs=rngs)

    def __call__(self, tokens):
        x = self.embed(tokens) + self.pos_embed(jnp.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.embed.attend(self.ln_f(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--logits", required=True)
    ap.add_argument("--atol", type=float, default=1e-4)
    a = ap.parse_args()

    config = json.load(open(os.path.join(a.run_dir, "config.json")))["model"]
    model = TransformerLM(config, nnx.Rngs(0))
    graphdef, abstract = nnx.split(model, nnx.Param)
    steps = sorted(int(s) for s in os.listdir(os.path.join(a.run_dir, "checkpoints")) if s.isdigit())
    path = os.path.abspath(os.path.join(a.run_dir, "checkpoints", str(steps[-1]), "default"))
    restored = ocp.StandardCheckpointer().restore(path, abstract)
    model = nnx.merge(graphdef, restored)

    tokens = jnp.asarray(np.load(a.tokens))
    flax_logits = np.asarray(model(tokens))
    cujax_logits = np.load(a.logits)
    err = float(np.abs(flax_logits - cujax_logits).max())
    print(f"step {steps[-1]}: max |flax - cujax| = {err:.3g} over {cujax_logits.size} logits "
          f"(atol {a.atol})")
    raise SystemExit(0 if err <= a.atol else 1)


if __name__ == "__main__":
    main()
