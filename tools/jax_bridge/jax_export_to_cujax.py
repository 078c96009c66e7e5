#!/usr/bin/env python3
"""Converts a function exported by jax.export into a cujax artifact (docs/export.md).

Input: the bytes of jax.export's Exported.serialize(), e.g. written with
    exp = jax.export.export(jax.jit(f), platforms=["cpu"])(*specs)
    open("f.jaxexport", "wb").write(exp.serialize())
Output: a cujax artifact that `cujax run` and cujax::Exported::load read.

Only single-device, single-platform exports without effects or symbolic shapes convert: cujax
runs @main exactly as given (a multi-platform module takes a platform index first).
"""
import argparse
import sys

import jax
from jax import export

import cujax_artifact


def key_str(entry):
    tu = jax.tree_util
    if isinstance(entry, tu.DictKey):
        return f".{entry.key}"
    if isinstance(entry, tu.GetAttrKey):
        return f".{entry.name}"
    if isinstance(entry, tu.SequenceKey):
        return f"[{entry.idx}]"
    return f".{entry}"


def leaf_paths(tree, root):
    """cujax-style paths of the flat leaves: arg0.w, arg1[2], result[0]."""
    dummy = jax.tree_util.tree_unflatten(tree, list(range(tree.num_leaves)))
    paths = []
    for path, _ in jax.tree_util.tree_flatten_with_path(dummy)[0]:
        keys = list(path)
        if root == "arg":  # in_tree is ((args...), {kwargs}); name positional args arg0, arg1...
            seq = jax.tree_util.SequenceKey
            if len(keys) < 2 or not isinstance(keys[0], seq) or keys[0].idx != 0 or \
                    not isinstance(keys[1], seq):
                raise SystemExit("keyword arguments are not supported; pass them positionally")
            head, keys = f"arg{keys[1].idx}", keys[2:]
        else:
            head = "result"
        paths.append(head + "".join(key_str(k) for k in keys))
    return paths


def leaves(avals, paths, shardings):
    out = []
    for aval, path, sharding in zip(avals, paths, shardings):
        if not all(isinstance(d, int) for d in aval.shape):
            raise SystemExit(f"{path}: symbolic shape {aval.shape} is not supported")
        if sharding is not None and str(sharding) not in ("{replicated}", "{maximal device=0}"):
            raise SystemExit(f"{path}: sharding {sharding} is not single-device")
        out.append({"path": path, "shape": list(aval.shape), "dtype": str(aval.dtype),
                    "weak_type": bool(getattr(aval, "weak_type", False))})
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("jax_exported", help="file with jax.export's Exported.serialize() bytes")
    p.add_argument("output", help="cujax artifact to write")
    p.add_argument("--platforms", default=None,
                   help="comma-separated cujax platforms to record (default: the export's, "
                        "among cpu and cuda)")
    a = p.parse_args()
    with open(a.jax_exported, "rb") as f:
        exp = export.deserialize(bytearray(f.read()))
    if exp.nr_devices != 1:
        sys.exit(f"the export is for {exp.nr_devices} devices; cujax artifacts are single-device")
    if len(exp.platforms) != 1:
        sys.exit(f"the export is for platforms {exp.platforms}; export for one platform")
    if exp.ordered_effects or exp.unordered_effects:
        sys.exit("exports with effects are not supported")
    if len(exp.module_kept_var_idx) != len(exp.in_avals):
        sys.exit("the export dropped unused arguments; cujax needs every argument in @main")
    platforms = a.platforms.split(",") if a.platforms else \
        [{"cpu": "cpu", "cuda": "cuda", "gpu": "cuda"}[pl] for pl in exp.platforms
         if pl in ("cpu", "cuda", "gpu")]
    if not platforms:
        sys.exit(f"no cujax platform among {exp.platforms}; give --platforms")
    cujax_artifact.write(
        a.output, exp.fun_name, exp.mlir_module(),
        leaves(exp.in_avals, leaf_paths(exp.in_tree, "arg"), exp.in_shardings_hlo),
        leaves(exp.out_avals, leaf_paths(exp.out_tree, "result"), exp.out_shardings_hlo),
        platforms, in_tree="jax:" + str(exp.in_tree), out_tree="jax:" + str(exp.out_tree))
    print(f"wrote {a.output}: {exp.fun_name}, {len(exp.in_avals)} inputs, "
          f"{len(exp.out_avals)} outputs")


if __name__ == "__main__":
    main()
