"""Restores a `cujax train` checkpoint into the equivalent Flax NNX model (bench/jax/model.py)
and compares its logits with those `cujax run` computed from an artifact of `cujax export --fn
forward`.

usage: flax_from_checkpoint.py RUN_DIR --tokens TOKENS.npy --logits LOGITS.npy [--atol A]

RUN_DIR is a `cujax train --out` folder (config.json and checkpoints/<step>/default). Needs
jax, flax (NNX) and orbax-checkpoint. interop_check.py runs the same check in scripts/gpu-check.sh.
"""
import argparse
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                                "jax"))
import interop_check  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--logits", required=True)
    ap.add_argument("--atol", type=float, default=1e-3)
    a = ap.parse_args()
    jax.config.update("jax_default_matmul_precision", "highest")
    with open(os.path.join(a.run_dir, "config.json")) as f:
        config = json.load(f)["model"]
    step, path = interop_check.latest_checkpoint(a.run_dir)
    model, how = interop_check.restore_flax(config, path)
    flax_logits = np.asarray(model(jnp.asarray(np.load(a.tokens))))
    cujax_logits = np.load(a.logits)
    err = float(np.abs(flax_logits - cujax_logits).max())
    print(f"step {step} (restored {how}): max |flax - cujax| = {err:.3g} over "
          f"{cujax_logits.size} logits (atol {a.atol})")
    raise SystemExit(0 if err <= a.atol else 1)


if __name__ == "__main__":
    main()
