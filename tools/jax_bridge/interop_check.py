#!/usr/bin/env python3
"""The interop checks of scripts/gpu-check.sh, each a stage printing CHECK lines (pass/FAIL with
the numbers compared; bench/jax/common.py):

  jax-export-forward   a Flax NNX model's forward, exported with jax.export and converted by
                       jax_export_to_cujax.py, runs in `cujax run` with JAX's logits
  jax-export-loss      the same for a jitted training step (clipping, AdamW): the loss, the
                       gradient norm and the updated parameters
  cujax-export-xla     `cujax export --fn forward` of a `cujax train` run runs under XLA
                       (run_in_xla.py's compile) with `cujax run`'s logits
  jax-deserializes-cujax-export
                       `cujax export --format jax` of that forward: jax.export.deserialize
                       loads it (avals, platform) and its call gives `cujax run`'s logits
  orbax-restores-cujax orbax.checkpoint.StandardCheckpointer().restore (no flags) reads that
                       run's checkpoint (cujax's default layout, OCDBT) into the Flax model,
                       whose logits match cujax's
  cujax-restores-orbax cujax restores checkpoints Orbax wrote from the Flax model (zarr:
                       use_ocdbt=False; ocdbt: StandardCheckpointer() with no flags, Orbax's
                       default) and computes the Flax model's logits
  prng                 JAX's normal, uniform, categorical and permutation draws for fixed keys,
                       written for tests/random_test.cpp (JaxDraws), which compares cujax's

It also writes fixtures to commit (--fixtures): a small checkpoint saved by Orbax in both
layouts and the PRNG draws.

usage: interop_check.py --cujax BIN --run-dir RUN --work DIR [--fixtures DIR] [--platform cuda]
       interop_check.py --dry-run   lists the checks (CHECKS, the rows bench/table.py expects);
                                    imports no JAX

RUN is a `cujax train --config tiny --out RUN` folder. Needs jax, flax, optax, orbax-checkpoint
and numpy, imported in main(): the module itself (CHECKS) imports the standard library only.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench", "jax"))
from common import CONFIGS, check, stage  # noqa: E402

# The CHECK rows, in order: a row of bench/table.py's interop table each (a prefix of the names
# printed; "not run" where none printed).
CHECKS = ["jax-export-forward", "jax-export-loss", "cujax-export-xla",
          "jax-deserializes-cujax-export", "orbax-restores-cujax", "cujax-restores-orbax (zarr)",
          "cujax-restores-orbax (ocdbt)", "prng"]

RTOL, ATOL = 1e-3, 1e-3  # float32 on a GPU: different kernels, different summation orders
# XLA runs a cujax export's DEFAULT-precision products in TF32 on a GPU, cujax in full f32
# (docs/cuda.md).
TF32_TOL = 2e-2


def import_jax():
    """JAX, Flax, Orbax and numpy, as module globals: imported here, not at import time, so that
    bench/table.py and --dry-run work where they are absent."""
    global jax, jnp, np, export, ocp, nnx, cujax_artifact, lm, run_in_xla
    import jax
    import jax.numpy as jnp
    import numpy as np

    # Compare float32 with float32: no TF32 in JAX's matrix products.
    jax.config.update("jax_default_matmul_precision", "highest")

    from jax import export
    import orbax.checkpoint as ocp
    from flax import nnx

    import cujax_artifact
    import model as lm
    import run_in_xla


def sh(*cmd):
    """Runs a command, returns its stdout; raises with its stderr's last lines when it fails.
    cujax itself runs with CUJAX_LD_LIBRARY_PATH as its library path when that is set
    (scripts/gpu-check.sh: the packed libraries, kept away from JAX's)."""
    env = dict(os.environ)
    if str(cmd[0]).endswith("cujax") and os.environ.get("CUJAX_LD_LIBRARY_PATH"):
        env["LD_LIBRARY_PATH"] = os.environ["CUJAX_LD_LIBRARY_PATH"]
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        tail = " | ".join((p.stderr or p.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"{os.path.basename(str(cmd[0]))} {cmd[1]}: exit {p.returncode}: {tail}")
    return p.stdout


def compare(name, got, want, rtol=RTOL, atol=ATOL):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return check(name, False, f"shape {got.shape} against {want.shape}")
    err = float(np.max(np.abs(got - want))) if got.size else 0.0
    ok = bool(np.allclose(got, want, rtol=rtol, atol=atol))
    return check(name, ok, f"max |diff| {err:.3g} over {got.size} values (rtol {rtol}, "
                           f"atol {atol}; max |value| {float(np.max(np.abs(want))):.3g})")


def run_config(run_dir):
    with open(os.path.join(run_dir, "config.json")) as f:
        return json.load(f)["model"]


def latest_checkpoint(run_dir):
    root = os.path.join(run_dir, "checkpoints")
    step = max(int(s) for s in os.listdir(root) if s.isdigit())
    return step, os.path.abspath(os.path.join(root, str(step), "default"))


def cujax_forward(a, model_dir, tokens, name):
    """`cujax export --fn forward` of model_dir, then `cujax run` on tokens: the logits."""
    art = os.path.join(a.work, f"{name}.cujax")
    tok = os.path.join(a.work, f"{name}-tokens.npy")
    out = os.path.join(a.work, f"{name}-logits.npy")
    np.save(tok, tokens)
    sh(a.cujax, "export", "--model", model_dir, "--out", art, "--fn", "forward",
       "--batch", tokens.shape[0], "--seq", tokens.shape[1], "--platform", a.platform)
    sh(a.cujax, "run", art, "--input", tok, "--output", out, "--platform", a.platform)
    return art, tok, out, np.load(out)


def tokens_for(config, batch=2, seq=32, seed=7):
    return np.random.default_rng(seed).integers(0, config["vocab_size"], (batch, seq),
                                                dtype=np.int32)


# ---- JAX export -> cujax run ----

def export_to_cujax(a, name, fn, args):
    """jax.export of fn on args, converted to a cujax artifact and run by `cujax run`; returns
    (JAX's outputs, cujax's outputs) as lists of arrays."""
    platform = {"gpu": "cuda", "cuda": "cuda", "cpu": "cpu"}[jax.default_backend()]
    exp = export.export(jax.jit(fn), platforms=[platform])(*args)
    jaxfile = os.path.join(a.work, f"{name}.jaxexport")
    with open(jaxfile, "wb") as f:
        f.write(exp.serialize())
    art = os.path.join(a.work, f"{name}.cujax")
    sh(sys.executable, os.path.join(HERE, "jax_export_to_cujax.py"), jaxfile, art)
    leaves = jax.tree_util.tree_leaves(args)
    cmd = [a.cujax, "run", art, "--platform", a.platform]
    for i, leaf in enumerate(leaves):
        path = os.path.join(a.work, f"{name}-in{i}.npy")
        np.save(path, np.asarray(leaf))
        cmd += ["--input", path]
    want = [np.asarray(x) for x in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
    outs = [os.path.join(a.work, f"{name}-out{i}.npy") for i in range(len(want))]
    for path in outs:
        cmd += ["--output", path]
    sh(*cmd)
    return want, [np.load(p) for p in outs]


def jax_export_forward(a, config):
    model = lm.make(config, seed=3, attention_implementation="xla")
    rebuild, flat, _ = lm.split_params(model)

    def forward(flat, tokens):
        return rebuild(flat)(tokens)

    want, got = export_to_cujax(a, "jax-forward", forward, (flat, jnp.asarray(tokens_for(config))))
    compare("jax-export-forward (logits)", got[0], want[0])


def jax_export_loss(a, config):
    """A whole training step: loss, gradients, clipping and AdamW (bench.py's make_optimizer,
    cujax train's recipe) from fresh optimizer state; the loss, the gradient norm and every
    updated parameter compared."""
    import optax
    from bench import make_optimizer
    model = lm.make(config, seed=4, attention_implementation="xla")
    rebuild, flat, _ = lm.split_params(model)
    tx = make_optimizer(3e-3, 0, 10)
    opt_state = tx.init(flat)
    window = tokens_for(config, seq=33, seed=8)

    def train_step(flat, opt_state, inputs, targets):
        def loss_fn(flat):
            logits = rebuild(flat)(inputs)
            return optax.softmax_cross_entropy_with_integer_labels(logits, targets).mean()
        loss, grads = jax.value_and_grad(loss_fn)(flat)
        updates, _ = tx.update(grads, opt_state, flat)
        return loss, optax.global_norm(grads), optax.apply_updates(flat, updates)

    want, got = export_to_cujax(
        a, "jax-train-step", train_step,
        (flat, opt_state, jnp.asarray(window[:, :-1]), jnp.asarray(window[:, 1:])))
    compare("jax-export-loss (train step: loss)", got[0], want[0])
    compare("jax-export-loss (train step: gradient norm)", got[1], want[1])
    params_got = np.concatenate([np.ravel(x) for x in got[2:]])
    params_want = np.concatenate([np.ravel(x) for x in want[2:]])
    compare(f"jax-export-loss (train step: {len(want) - 2} updated parameters)", params_got,
            params_want)


# ---- cujax export -> XLA, and Orbax reading cujax's checkpoint ----

def cujax_export_xla(a, config):
    tokens = tokens_for(config)
    art, tok, out, logits = cujax_forward(a, a.run_dir, tokens, "cujax-forward")
    header, text = cujax_artifact.read(art)
    if len(header["in"]) != 1:
        raise ValueError(f"{art} takes {len(header['in'])} inputs, expected the tokens alone")
    exe = run_in_xla.compile_stablehlo(text)
    args = [jax.device_put(tokens)]
    results = exe.execute_sharded(args).disassemble_into_single_device_arrays()
    # The artifact's products have DEFAULT precision, which XLA runs in TF32 on a GPU while
    # cujax's default is full f32 (docs/cuda.md): a TF32-sized tolerance.
    compare("cujax-export-xla (logits)", np.asarray(results[0][0]), logits, rtol=TF32_TOL,
            atol=TF32_TOL)
    return logits


def jax_deserializes_cujax_export(a, config, cujax_logits):
    """`cujax export --format jax` of the run's forward (issue 36): `cujax run` of those bytes
    gives the cujax artifact's logits, jax.export.deserialize loads them with the avals and the
    platform cujax wrote, and JAX's call of them gives the same logits."""
    tokens = tokens_for(config)
    name = "jax-deserializes-cujax-export"
    path = os.path.join(a.work, "cujax-forward.jaxexport")
    sh(a.cujax, "export", "--model", a.run_dir, "--out", path, "--fn", "forward", "--format",
       "jax", "--batch", tokens.shape[0], "--seq", tokens.shape[1], "--platform", a.platform)
    tok = os.path.join(a.work, "cujax-forward-jax-tokens.npy")
    out = os.path.join(a.work, "cujax-forward-jax-logits.npy")
    np.save(tok, tokens)
    what = f"{name} (cujax run of the jax format, against the cujax artifact's)"
    try:  # cujax's side failing is its row's FAIL; JAX's side still runs
        sh(a.cujax, "run", path, "--input", tok, "--output", out, "--platform", a.platform)
        compare(what, np.load(out), cujax_logits, rtol=0, atol=0)
    except RuntimeError as e:
        check(what, False, str(e)[:300])
    with open(path, "rb") as f:
        exp = export.deserialize(bytearray(f.read()))
    platform = {"gpu": "cuda", "cuda": "cuda", "cpu": "cpu"}[jax.default_backend()]
    want_in = [((tokens.shape[0], tokens.shape[1]), "int32")]
    want_out = [((tokens.shape[0], tokens.shape[1], config["vocab_size"]), "float32")]
    got_in = [(tuple(x.shape), str(x.dtype)) for x in exp.in_avals]
    got_out = [(tuple(x.shape), str(x.dtype)) for x in exp.out_avals]
    problems = [f"{what} {got}, expected {want}" for what, got, want in (
        ("in_avals", got_in, want_in), ("out_avals", got_out, want_out),
        ("platforms", tuple(exp.platforms), (platform,))) if got != want]
    if not check(f"{name} (deserialize: avals and platform)", not problems,
                 "; ".join(problems) or f"{exp.fun_name}: {got_in} -> {got_out} on "
                                         f"{exp.platforms}, calling convention "
                                         f"{exp.calling_convention_version}"):
        return
    got = np.asarray(exp.call(jnp.asarray(tokens)))
    # The module's products have DEFAULT precision: TF32 under XLA on a GPU.
    compare(f"{name} (Exported.call's logits)", got, cujax_logits, rtol=TF32_TOL, atol=TF32_TOL)


def restore_flax(config, path):
    """The Flax model with the parameters of the checkpoint at `path`, restored by Orbax into the
    model's abstract state, or (when Orbax's tree does not fit that target) restored without a
    target and matched by path."""
    rebuild, _, abstract = lm.split_params(lm.make(config, seed=0))
    ckptr = ocp.StandardCheckpointer()
    try:
        restored = ckptr.restore(path, abstract)
        how = "into the model's abstract state"
    except Exception as e:  # noqa: BLE001 (reported, then the fallback)
        print(f"restore into the abstract state failed ({type(e).__name__}: "
              f"{str(e).splitlines()[0][:200] if str(e) else ''}); restoring without a target")
        restored = ckptr.restore(path)
        how = "without a target, matched by path"
    return rebuild(lm.flat_params(restored)), how


def orbax_restores_cujax(a, config, cujax_logits):
    """cujax saves in Orbax's default layout, OCDBT (issue 39): a checkpoint without its
    manifest fails here, whatever Orbax makes of it."""
    step, path = latest_checkpoint(a.run_dir)
    if not os.path.exists(os.path.join(path, "manifest.ocdbt")):
        return check(f"orbax-restores-cujax (step {step})", False,
                     f"{path} has no manifest.ocdbt: cujax's checkpoint is not in OCDBT, "
                     f"Orbax's default layout ({' '.join(sorted(os.listdir(path)))[:200]})")
    model, how = restore_flax(config, path)
    flax_logits = np.asarray(model(jnp.asarray(tokens_for(config))))
    compare(f"orbax-restores-cujax (ocdbt, step {step}, StandardCheckpointer() {how})",
            flax_logits, cujax_logits)


# ---- Orbax writes, cujax reads ----

def orbax_save(path, tree, use_ocdbt=None):
    """use_ocdbt None: StandardCheckpointer() with no flags, Orbax's defaults."""
    ckptr = ocp.StandardCheckpointer(**({} if use_ocdbt is None else {"use_ocdbt": use_ocdbt}))
    ckptr.save(os.path.abspath(path), tree)
    ckptr.wait_until_finished()
    ckptr.close()


def nested(flat):
    """{"a.b.c": x} -> {"a": {"b": {"c": x}}}, leaves as numpy arrays."""
    out = {}
    for name, value in flat.items():
        node = out
        *parents, last = name.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = np.asarray(value)
    return out


def cujax_restores_orbax(a, config):
    model = lm.make(config, seed=5)
    params = nnx.state(model, nnx.Param)
    tokens = tokens_for(config)
    want = np.asarray(model(jnp.asarray(tokens)))
    # ocdbt: Orbax's defaults (issue 39), checked to be OCDBT below
    for layout, use_ocdbt in (("zarr", False), ("ocdbt", None)):
        def one():
            model_dir = os.path.join(a.work, f"orbax-{layout}")
            shutil.rmtree(model_dir, ignore_errors=True)
            os.makedirs(os.path.join(model_dir, "checkpoints", "1"))
            with open(os.path.join(model_dir, "config.json"), "w") as f:
                json.dump({"model": config}, f)  # what `cujax export` reads of a run's config
            path = os.path.join(model_dir, "checkpoints", "1", "default")
            try:  # the nnx.State itself, as Flax's documentation saves it
                orbax_save(path, params, use_ocdbt)
            except Exception as e:  # noqa: BLE001 (reported, then plain nested dicts)
                print(f"saving the nnx.State failed ({type(e).__name__}: {e}); saving nested dicts")
                shutil.rmtree(path, ignore_errors=True)
                orbax_save(path, nested(lm.flat_params(params)), use_ocdbt)
            is_ocdbt = os.path.exists(os.path.join(path, "manifest.ocdbt"))
            if is_ocdbt != (layout == "ocdbt"):
                return check(f"cujax-restores-orbax ({layout})", False,
                             f"Orbax wrote {'an' if is_ocdbt else 'no'} OCDBT manifest in {path}")
            try:
                _, _, _, got = cujax_forward(a, model_dir, tokens, f"orbax-{layout}")
            except RuntimeError as e:
                return check(f"cujax-restores-orbax ({layout})", False, str(e)[:300])
            return compare(f"cujax-restores-orbax ({layout})", got, want)
        stage(f"cujax-restores-orbax-{layout}", one)


def write_fixtures(a):
    """A small tree saved by Orbax in both layouts, for cujax's checkpoint tests: values that a
    test can recompute (arange), float32, bfloat16, int32 and a scalar."""
    tree = {"dense": {"kernel": np.arange(12, dtype=np.float32).reshape(3, 4) / 8,
                      "bias": np.arange(4, dtype=np.float32) - 2},
            "embed": (np.arange(6, dtype=np.float32).reshape(2, 3) / 4).astype(jnp.bfloat16),
            "count": np.int32(7)}
    for layout, use_ocdbt in (("zarr", False), ("ocdbt", True)):
        path = os.path.join(a.fixtures, f"orbax-{layout}")
        shutil.rmtree(path, ignore_errors=True)
        orbax_save(path, tree, use_ocdbt)
        files = sorted(os.path.relpath(os.path.join(d, f), path)
                       for d, _, fs in os.walk(path) for f in fs)
        print(f"fixture {path}: {len(files)} files: {' '.join(files)}")
    with open(os.path.join(a.fixtures, "versions.json"), "w") as f:
        json.dump({"jax": jax.__version__, "orbax": getattr(ocp, "__version__", "?")}, f)


def prng_draws(a):
    """JAX's draws for fixed keys, in the form tests/random_test.cpp (JaxDraws) reads."""
    logits = [0.5, -1.0, 2.0, 0.0]
    draws = []
    for seed in (0, 42):
        key = jax.random.PRNGKey(seed)
        draws.append({"seed": seed, "sampler": "normal", "shape": [5],
                      "values": np.asarray(jax.random.normal(key, (5,))).tolist()})
        draws.append({"seed": seed, "sampler": "uniform", "shape": [5],
                      "values": np.asarray(jax.random.uniform(key, (5,))).tolist()})
        draws.append({"seed": seed, "sampler": "categorical", "shape": [8], "logits": logits,
                      "values": np.asarray(jax.random.categorical(
                          key, jnp.asarray(logits), shape=(8,))).tolist()})
        draws.append({"seed": seed, "sampler": "permutation", "n": 10,
                      "values": np.asarray(jax.random.permutation(key, 10)).tolist()})
    out = {"jax": jax.__version__,
           "threefry_partitionable": bool(jax.config.jax_threefry_partitionable),
           "draws": draws}
    path = os.path.join(a.fixtures, "jax_random_draws.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {path}: {len(draws)} draws (partitionable {out['threefry_partitionable']})")
    check("prng (JAX's draws written for tests/random_test.cpp JaxDraws)", True, path)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-run", action="store_true", help="list the checks; import no JAX")
    p.add_argument("--cujax")
    p.add_argument("--run-dir")
    p.add_argument("--work")
    p.add_argument("--fixtures", default=None)
    p.add_argument("--platform", default="cuda")
    a = p.parse_args()
    if a.dry_run:
        print("\n".join(f"check {name}" for name in CHECKS))
        return
    missing = [o for o in ("cujax", "run_dir", "work") if not getattr(a, o)]
    if missing:
        p.error("needs " + ", ".join("--" + o.replace("_", "-") for o in missing))
    import_jax()
    a.cujax = os.path.abspath(a.cujax)
    os.makedirs(a.work, exist_ok=True)
    a.fixtures = a.fixtures or os.path.join(a.work, "fixtures")
    os.makedirs(a.fixtures, exist_ok=True)
    print(f"jax {jax.__version__} ({jax.default_backend()}), orbax "
          f"{getattr(ocp, '__version__', '?')}, devices {jax.devices()}", flush=True)
    # The checks that need the cujax run (its checkpoint) skip when it is missing; the others
    # use the tiny config.
    config = stage("read the run's config", run_config, a.run_dir)
    have_run = config is not None
    if not have_run:
        check("cujax train run", False, f"no cujax run at {a.run_dir}: cujax-export-xla, "
                                        "jax-deserializes-cujax-export and orbax-restores-cujax "
                                        "not run")
        config = dict(CONFIGS["tiny"])
    stage("jax-export-forward", jax_export_forward, a, config)
    stage("jax-export-loss", jax_export_loss, a, config)
    if have_run:
        cujax_logits = stage("cujax-export-xla", cujax_export_xla, a, config)
        if cujax_logits is None:  # XLA's side failed: Orbax's check still needs cujax's logits
            try:
                cujax_logits = cujax_forward(a, a.run_dir, tokens_for(config), "cujax-forward")[3]
            except Exception as e:  # noqa: BLE001
                print(f"ERROR cujax forward: {e}")
        if cujax_logits is not None:
            stage("jax-deserializes-cujax-export", jax_deserializes_cujax_export, a, config,
                  cujax_logits)
            stage("orbax-restores-cujax", orbax_restores_cujax, a, config, cujax_logits)
    stage("cujax-restores-orbax", cujax_restores_orbax, a, config)
    stage("fixtures", write_fixtures, a)
    stage("prng", prng_draws, a)


if __name__ == "__main__":
    main()
