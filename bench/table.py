#!/usr/bin/env python3
"""The table scripts/gpu-check.sh prints last: cujax against JAX, measured in the same run on the
same GPU, from the logs of the run's stages (LOG/<stage>.txt, LOG/stages.txt,
LOG/metrics-<config>.csv, LOG/mem-<stage>.txt). Standard library only.

usage: table.py LOG [--dry-run]      (--dry-run: the layout, every cell "not run")
"""
import argparse
import csv
import datetime
import glob
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "jax"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools",
                                "jax_bridge"))
from common import CONFIGS, peak_tflops, train_flops_per_token  # noqa: E402
import interop_check  # noqa: E402 (its CHECKS; it imports JAX only when run)

TRAIN_CONFIGS = ("tiny", "small", "gpt2")
NOT_RUN = "not run"


def read(log, name):
    try:
        with open(os.path.join(log, name), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def results(log):
    """Every RESULT line of every stage log: {name: value}."""
    out = {}
    for path in glob.glob(os.path.join(log, "*.txt")):
        with open(path, errors="replace") as f:
            for line in f:
                m = re.match(r"RESULT (\S+)=(\S+) unit=", line)
                if m:
                    try:
                        out[m.group(1)] = float(m.group(2))
                    except ValueError:
                        pass
    return out


def cujax_train(log, config):
    """tokens/s (median of the log windows after the first) and the first step's seconds."""
    tokens, compile_s = None, None
    try:
        with open(os.path.join(log, f"metrics-{config}.csv")) as f:
            rows = [float(r["tokens_per_s"]) for r in csv.DictReader(f)]
        rows = [r for r in (rows[1:] if len(rows) > 1 else rows) if r > 0]
        tokens = statistics.median(rows) if rows else None
    except (OSError, KeyError, ValueError):
        pass
    m = re.search(r"the first, with compilation: ([0-9.]+) s", read(log, f"train-{config}.txt"))
    if m:
        compile_s = float(m.group(1))
    return tokens, compile_s


def sampled_peak_mib(log, stage):
    """The largest rise of the GPU's used memory over its first sample while the stage ran
    (nvidia-smi every 200 ms): what the process took, its CUDA context included."""
    values = []
    for line in read(log, f"mem-{stage}.txt").splitlines():
        try:
            values.append(float(line.split(",")[0]))
        except ValueError:
            pass
    return max(values) - values[0] if len(values) > 1 else None


def cujax_dispatch(log):
    text = read(log, "dispatch.txt")
    rt = re.search(r"steady-state call with block_until_ready\s+([0-9.]+) us", text)
    dq = re.search(r"steady-state dispatch \(no wait\)\s+([0-9.]+) us", text)
    return (float(rt.group(1)) if rt else None), (float(dq.group(1)) if dq else None)


def cujax_tpot(log):
    """TPOT ms of `cujax bench serve`'s rows: {slots: ms}."""
    out = {}
    for line in read(log, "serve.txt").splitlines():
        m = re.match(r"max-batch (\d+)\s+\d+\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S+)\s+(\S+)\s+\d+", line)
        if m and m.group(3) != "-":
            out[int(m.group(1))] = float(m.group(3))
    return out


def device_kind(log):
    m = re.search(r" on (NVIDIA [^:]+):", read(log, "jax-train-tiny.txt"))
    if m:
        return m.group(1)
    name = read(log, "gpu-name.txt").strip().splitlines()
    return name[0] if name else ""


def fmt(v, digits=3):
    if v is None:
        return NOT_RUN
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("log")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--peak-tflops", type=float, default=None)
    a = p.parse_args()
    log = a.log
    r = {} if a.dry_run else results(log)
    kind = "" if a.dry_run else device_kind(log)
    peak = peak_tflops(kind, a.peak_tflops)
    rows = []  # (measurement, unit, cujax, jax, better: "higher"/"lower", note)

    def row(what, unit, cujax, jax, better, note=""):
        rows.append((what, unit, cujax, jax, better, note))

    for c in TRAIN_CONFIGS:
        tok, comp = (None, None) if a.dry_run else cujax_train(log, c)
        seq = CONFIGS[c]["max_len"]
        flops = train_flops_per_token(CONFIGS[c], seq)
        j32 = r.get(f"jax.train.{c}.float32.tokens_per_s")
        j16 = r.get(f"jax.train.{c}.bfloat16.tokens_per_s")
        mfu = lambda t: None if t is None or not peak else 100 * t * flops / (peak * 1e12)  # noqa
        row(f"train {c}: tokens/s, f32", "tokens/s", tok, j32, "higher",
            "cujax train (f32 only)")
        row(f"train {c}: tokens/s, cujax f32 vs JAX bf16", "tokens/s", tok, j16, "higher",
            "cujax has no bf16 training")
        row(f"train {c}: MFU of the bf16 peak", "%", mfu(tok), mfu(j16), "higher",
            "cujax f32, JAX bf16")
        row(f"train {c}: cold compile of the step", "s", comp,
            r.get(f"jax.train.{c}.float32.compile_s"), "lower",
            "cujax: first step incl. run; JAX: lower().compile()")
        row(f"train {c}: peak GPU memory (nvidia-smi)", "MiB",
            None if a.dry_run else sampled_peak_mib(log, f"train-{c}"),
            None if a.dry_run else sampled_peak_mib(log, f"jax-train-{c}"), "lower",
            f"JAX allocator peak {fmt(r.get(f'jax.train.{c}.peak_mib'))} MiB")
    for T in (1024, 4096):
        row(f"attention T={T}, default implementation", "TFLOP/s",
            r.get(f"cujax.attention.default.T{T}"), r.get(f"jax.attention.cudnn.T{T}"), "higher",
            "JAX: implementation='cudnn'")
        for impl in ("xla", "cudnn"):
            row(f"attention T={T}, implementation={impl}", "TFLOP/s",
                r.get(f"cujax.attention.{impl}.T{T}"), r.get(f"jax.attention.{impl}.T{T}"),
                "higher")
    tpot = {} if a.dry_run else cujax_tpot(log)
    for b in (1, 8):
        row(f"decode small, batch {b}", "ms/token", r.get(f"cujax.decode.small.b{b}"),
            r.get(f"jax.decode.small.b{b}"), "lower", "the jitted KV-cache step alone")
    for b in (1, 8):
        row(f"serve small, {b} slot(s): TPOT", "ms/token", tpot.get(b),
            r.get(f"jax.decode.small.b{b}"), "lower", "cujax: HTTP server and scheduler too")
    rt, dq = (None, None) if a.dry_run else cujax_dispatch(log)
    row("jitted call, round trip", "us", rt, r.get("jax.dispatch.roundtrip_us"), "lower")
    row("jitted call, dispatch only", "us", dq, r.get("jax.dispatch.async_us"), "lower")

    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"=== cujax against JAX, same run, same GPU ({kind or 'GPU unknown'}; "
          f"bf16 peak {fmt(peak) + ' TFLOP/s' if peak else 'unknown'}; {when})")
    head = f"{'measurement':<44} {'unit':<9} {'cujax':>10} {'JAX':>10} {'cujax/JAX':>10}  note"
    print(head)
    print("-" * len(head))
    for what, unit, cu, jx, better, note in rows:
        ratio = NOT_RUN if cu is None or jx is None or jx == 0 else f"{cu / jx:.2f}"
        arrow = "(higher is better)" if better == "higher" else "(lower is better)"
        print(f"{what:<44} {unit:<9} {fmt(cu):>10} {fmt(jx):>10} {ratio:>10}  {arrow} {note}")

    print("\n=== interop")
    checks = []
    if not a.dry_run:
        for line in read(log, "interop.txt").splitlines():
            m = re.match(r"CHECK (.+?) (pass|FAIL)\b ?(.*)", line)
            if m:
                checks.append(m.groups())
    for name in interop_check.CHECKS:
        got = [c for c in checks if c[0].startswith(name)]
        if not got:
            print(f"{name:<44} {NOT_RUN}")
        for what, verdict, detail in got:
            print(f"{what:<44} {verdict:<5} {detail}")
    errors = [] if a.dry_run else [l for l in read(log, "interop.txt").splitlines()
                                   if l.startswith("ERROR ")]
    for e in errors:
        print(e)

    print("\n=== stages")
    stages = read(log, "stages.txt").splitlines() if not a.dry_run else []
    if a.dry_run:
        stages = read(log, "plan.txt").splitlines()
    for line in stages:
        print(line)


if __name__ == "__main__":
    main()
