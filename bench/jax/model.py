"""cujax's models::TransformerLM (src/models/transformer.cpp) in Flax NNX: the same modules, so
the same parameter paths and shapes, and Flax's initialisers, which cujax's nnx mirrors
(lecun_normal kernels, zero biases, unit LayerNorm scales, variance_scaling(1, fan_in, normal)
embeddings):

    embed.embedding (V, d), pos_embed.embedding (max_len, d),
    blocks.<i>.ln1.{scale,bias}, blocks.<i>.attn.{query,key,value}.kernel (d, N, H) .bias (N, H),
    blocks.<i>.attn.out.kernel (N, H, d) .bias (d,), blocks.<i>.ln2.{scale,bias},
    blocks.<i>.mlp.fc.{kernel,bias} (d, f), blocks.<i>.mlp.proj.{kernel,bias} (f, d), ln_f.

A block is x + attn(ln1(x)), then x + proj(gelu(fc(ln2(x)))) (tanh gelu, LayerNorm epsilon
1e-6); attention is causal with scale 1/sqrt(H); logits are ln_f(x) @ embed.embedding^T.
Parameters are float32; `dtype` is the computation dtype (None: float32, as cujax computes;
jnp.bfloat16 for mixed precision). The attention projections are nnx.LinearGeneral modules
called directly rather than nnx.MultiHeadAttention's __call__, whose attention_fn and decode
interfaces have changed between Flax releases; the parameters are the same.
"""
import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


def _list(items):
    return nnx.List(items) if hasattr(nnx, "List") else list(items)


class Attention(nnx.Module):
    def __init__(self, d, num_heads, dtype, rngs):
        h = d // num_heads
        kw = dict(dtype=dtype, param_dtype=jnp.float32, rngs=rngs)
        self.query = nnx.LinearGeneral(d, (num_heads, h), axis=-1, **kw)
        self.key = nnx.LinearGeneral(d, (num_heads, h), axis=-1, **kw)
        self.value = nnx.LinearGeneral(d, (num_heads, h), axis=-1, **kw)
        self.out = nnx.LinearGeneral((num_heads, h), d, axis=(-2, -1), **kw)


class Mlp(nnx.Module):
    def __init__(self, d, f, dtype, rngs):
        self.fc = nnx.Linear(d, f, dtype=dtype, param_dtype=jnp.float32, rngs=rngs)
        self.proj = nnx.Linear(f, d, dtype=dtype, param_dtype=jnp.float32, rngs=rngs)

    def __call__(self, x):
        return self.proj(jax.nn.gelu(self.fc(x), approximate=True))


class Block(nnx.Module):
    def __init__(self, c, dtype, rngs):
        d = c["d_model"]
        norm = dict(epsilon=1e-6, dtype=dtype, param_dtype=jnp.float32, rngs=rngs)
        self.ln1 = nnx.LayerNorm(d, **norm)
        self.attn = Attention(d, c["num_heads"], dtype, rngs)
        self.ln2 = nnx.LayerNorm(d, **norm)
        self.mlp = Mlp(d, c["d_ff"], dtype, rngs)


class TransformerLM(nnx.Module):
    def __init__(self, c, rngs, dtype=None, attention_implementation=None):
        # Plain ints and strings: static attributes of the graph definition.
        self.max_len, self.num_layers = c["max_len"], c["num_layers"]
        self.num_heads, self.head_dim = c["num_heads"], c["d_model"] // c["num_heads"]
        self.implementation = attention_implementation
        d = c["d_model"]
        kw = dict(dtype=dtype, param_dtype=jnp.float32, rngs=rngs)
        self.embed = nnx.Embed(c["vocab_size"], d, **kw)
        self.pos_embed = nnx.Embed(c["max_len"], d, **kw)
        self.blocks = _list(Block(c, dtype, rngs) for _ in range(c["num_layers"]))
        self.ln_f = nnx.LayerNorm(d, epsilon=1e-6, dtype=dtype, param_dtype=jnp.float32,
                                  rngs=rngs)

    def __call__(self, tokens):
        """tokens int (B, T) -> logits float32 (B, T, V)."""
        x = self.embed(tokens) + self.pos_embed(jnp.arange(tokens.shape[1]))
        for blk in self.blocks:
            h = blk.ln1(x)
            a = blk.attn
            o = jax.nn.dot_product_attention(a.query(h), a.key(h), a.value(h), is_causal=True,
                                             implementation=self.implementation)
            x = x + a.out(o)
            x = x + blk.mlp(blk.ln2(x))
        return self.embed.attend(self.ln_f(x)).astype(jnp.float32)

    def init_cache(self, batch, dtype=jnp.float32):
        """One (key, value) pair per block, each (B, max_len, N, H), as cujax's init_cache."""
        shape = (batch, self.max_len, self.num_heads, self.head_dim)
        return [(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype)) for _ in range(self.num_layers)]

    def decode_step(self, cache, tokens, position):
        """tokens (B, 1) at `position` (i32 scalar: tokens already decoded) -> logits (B, V) and
        the updated cache; the new key and value go to row `position`, and the query attends
        to rows 0..position."""
        x = self.embed(tokens) + self.pos_embed(jnp.reshape(position, (1,)))
        mask = (jnp.arange(self.max_len) <= position)[None, None, None, :]
        new_cache = []
        for blk, (ck, cv) in zip(self.blocks, cache):
            h = blk.ln1(x)
            a = blk.attn
            zero = jnp.zeros((), jnp.int32)
            start = (zero, position.astype(jnp.int32), zero, zero)
            ck = jax.lax.dynamic_update_slice(ck, a.key(h).astype(ck.dtype), start)
            cv = jax.lax.dynamic_update_slice(cv, a.value(h).astype(cv.dtype), start)
            q = a.query(h).astype(ck.dtype)
            o = jax.nn.dot_product_attention(q, ck, cv, mask=mask, implementation="xla")
            x = x + a.out(o)
            x = x + blk.mlp(blk.ln2(x))
            new_cache.append((ck, cv))
        return self.embed.attend(self.ln_f(x))[:, 0].astype(jnp.float32), new_cache


def make(config, seed=0, dtype=None, attention_implementation=None):
    return TransformerLM(config, nnx.Rngs(seed), dtype=dtype,
                         attention_implementation=attention_implementation)


# ---- parameters as a flat {cujax path: array} mapping ----

def _key_name(k):
    tu = jax.tree_util
    if isinstance(k, tu.DictKey):
        return str(k.key)
    if isinstance(k, tu.GetAttrKey):
        return str(k.name)
    if isinstance(k, tu.SequenceKey):
        return str(k.idx)
    if hasattr(tu, "FlattenedIndexKey") and isinstance(k, tu.FlattenedIndexKey):
        return str(k.key)
    return str(k)


def path_name(path):
    """A tree path as cujax writes it: blocks.0.attn.query.kernel (a Variable's trailing
    `value` or `raw_value` dropped)."""
    parts = [_key_name(k) for k in path]
    while parts and parts[-1] in ("value", "raw_value"):
        parts.pop()
    return ".".join(parts)


def flatten(tree):
    """(names, leaves, treedef) of any tree of arrays: nnx.State, nested dicts, Orbax output."""
    with_path, treedef = jax.tree_util.tree_flatten_with_path(tree)
    return [path_name(p) for p, _ in with_path], [leaf for _, leaf in with_path], treedef


def split_params(model):
    """(rebuild, flat, abstract): flat is {cujax path: array} of the model's nnx.Param
    variables, rebuild(flat) the model with those values (inside jit too: it is how jitted
    functions see the model), abstract their nnx.State of jax.ShapeDtypeStruct (a target for
    Orbax's restore). Names, shapes and dtypes are checked; the error lists every difference."""
    graphdef, state, rest = nnx.split(model, nnx.Param, ...)
    names, leaves, treedef = flatten(state)
    specs = [(n, tuple(leaf.shape), leaf.dtype) for n, leaf in zip(names, leaves)]
    abstract = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state)

    def rebuild(flat):
        problems = [f"missing {n}" for n, _, _ in specs if n not in flat]
        problems += [f"extra {n}" for n in flat if n not in set(names)]
        problems += [f"{n}: shape {tuple(np.shape(flat[n]))}, model {shape}"
                     for n, shape, _ in specs if n in flat and tuple(np.shape(flat[n])) != shape]
        if problems:
            raise ValueError("parameters do not match the model: " + "; ".join(problems[:20]))
        values = [jnp.asarray(flat[n], dtype=dtype) for n, _, dtype in specs]
        return nnx.merge(graphdef, jax.tree_util.tree_unflatten(treedef, values), rest)

    return rebuild, dict(zip(names, leaves)), abstract


def flat_params(tree):
    """{cujax path: leaf} of a tree of parameters (an nnx.State, Orbax's nested dicts)."""
    names, leaves, _ = flatten(tree)
    return dict(zip(names, leaves))
