#!/usr/bin/env python3
"""Compiles a cujax artifact's StableHLO with XLA (through jax's backend) and compares its outputs
with expected .npy files, e.g. the ones `cujax run` wrote.

    python3 run_in_xla.py model.cujax --input x.npy --input w.npy --expect out.npy [--rtol 1e-5]

bfloat16 .npy files (descr '<V2') are read with ml_dtypes. Exit code 0 when every output
matches, 1 otherwise.
"""
import argparse
import sys

import numpy as np
import jax
from jax._src.lib import xla_client

import cujax_artifact


def load(path, dtype):
    a = np.load(path)
    if dtype == "bfloat16":
        import ml_dtypes
        a = a.view(ml_dtypes.bfloat16)
    return a


def compile_stablehlo(text):
    """XLA's compile of MLIR text through jaxlib's backend; the entry point and its arguments
    moved between jaxlib versions, so each known form is tried in turn."""
    try:
        from jax.extend.backend import get_backend
    except ImportError:
        from jax.lib.xla_bridge import get_backend
    backend = get_backend()
    options = xla_client.CompileOptions()
    device = backend.local_devices()[0]
    attempts = []
    if hasattr(backend, "compile_and_load"):
        device_list = getattr(xla_client, "DeviceList", None)
        devices = device_list((device,)) if device_list else [device]
        attempts += [lambda: backend.compile_and_load(text, devices, options),
                     lambda: backend.compile_and_load(text.encode(), devices, options),
                     lambda: backend.compile_and_load(text, [device], options)]
    if hasattr(backend, "compile"):
        attempts += [lambda: backend.compile(text, options),
                     lambda: backend.compile(text.encode(), options)]
    errors = []
    for attempt in attempts:
        try:
            return attempt()
        except Exception as e:  # noqa: BLE001 (the next form, or all errors at the end)
            errors.append(f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
    raise RuntimeError("no form of jaxlib's compile took the module: " + " | ".join(errors))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("artifact")
    p.add_argument("--input", action="append", default=[], help=".npy per input, in order")
    p.add_argument("--expect", action="append", default=[], help=".npy per output, in order")
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--atol", type=float, default=1e-6)
    a = p.parse_args()
    header, text = cujax_artifact.read(a.artifact)
    ins, outs = header["in"], header["out"]
    if len(a.input) != len(ins) or len(a.expect) != len(outs):
        sys.exit(f"{a.artifact} takes {len(ins)} inputs and gives {len(outs)} outputs; got "
                 f"{len(a.input)} --input and {len(a.expect)} --expect")
    args = []
    for leaf, path in zip(ins, a.input):
        x = load(path, leaf["dtype"])
        if list(x.shape) != leaf["shape"] or str(x.dtype) != leaf["dtype"]:
            sys.exit(f"{path} is {x.dtype}{list(x.shape)}, input {leaf['path']} is "
                     f"{leaf['dtype']}{leaf['shape']}")
        args.append(jax.device_put(x))
    exe = compile_stablehlo(text)
    results = exe.execute_sharded(args).disassemble_into_single_device_arrays()
    ok = True
    for leaf, path, got in zip(outs, a.expect, results):
        got = np.asarray(got[0]).astype(np.float64)
        want = load(path, leaf["dtype"]).astype(np.float64)
        close = got.shape == want.shape and np.allclose(got, want, rtol=a.rtol, atol=a.atol)
        err = np.max(np.abs(got - want)) if got.shape == want.shape and got.size else 0.0
        print(f"{leaf['path']}: {'ok' if close else 'MISMATCH'} (max abs diff {err:.3g})")
        ok = ok and close
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
