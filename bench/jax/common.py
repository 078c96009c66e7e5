"""Shared by the JAX reference programs: result lines, stages that fail alone, timing.

Every figure is printed as one line that bench/table.py reads:

    RESULT <name>=<value> unit=<unit>
    CHECK <name> pass|FAIL <detail>
    ERROR <stage>: <message>

Needs only the standard library, so that the table and --dry-run work without JAX.
"""
import sys
import time
import traceback


def result(name, value, unit):
    print(f"RESULT {name}={value:.6g} unit={unit}", flush=True)


def check(name, ok, detail=""):
    print(f"CHECK {name} {'pass' if ok else 'FAIL'} {detail}".rstrip(), flush=True)
    return ok


def stage(name, fn, *args, **kwargs):
    """Runs fn; an exception prints an ERROR line (and the traceback on stderr) and returns None,
    so that the next stage still runs."""
    t0 = time.perf_counter()
    print(f"--- {name}", flush=True)
    try:
        out = fn(*args, **kwargs)
        print(f"--- {name} done in {time.perf_counter() - t0:.1f} s", flush=True)
        return out
    except Exception as e:  # one stage's failure must not stop the others
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(f"ERROR {name}: {type(e).__name__}: {first[:300]}", flush=True)
        traceback.print_exc(file=sys.stderr)
        sys.stderr.flush()
        return None


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


# Dense bf16 peak of the GPUs we may get, by jax's device_kind (override with --peak-tflops).
PEAK_BF16_TFLOPS = {"H200": 989.4, "H100": 989.4, "A100": 312.0, "L40S": 362.0, "A10": 125.0}


def peak_tflops(device_kind, override=None):
    if override:
        return float(override)
    for key, value in PEAK_BF16_TFLOPS.items():
        if key in device_kind:
            return value
    return None


# The model configs of src/models/transformer.cpp (tiny_config, small_config, gpt2_config).
CONFIGS = {
    "tiny": dict(name="tiny", vocab_size=256, max_len=128, d_model=128, num_layers=4,
                 num_heads=4, d_ff=512),
    "small": dict(name="small", vocab_size=256, max_len=256, d_model=384, num_layers=6,
                  num_heads=6, d_ff=1536),
    "gpt2": dict(name="gpt2", vocab_size=50257, max_len=1024, d_model=768, num_layers=12,
                 num_heads=12, d_ff=3072),
}


def parameter_count(c):
    d, f, L = c["d_model"], c["d_ff"], c["num_layers"]
    block = 2 * 2 * d + 4 * (d * d + d) + (d * f + f) + (f * d + d)
    return c["vocab_size"] * d + c["max_len"] * d + L * block + 2 * d


def train_flops_per_token(c, seq):
    """6 N (forward and backward through every weight that multiplies, the tied head included,
    the position table excluded) plus 12 L T d for attention's two products (PaLM's count)."""
    n = parameter_count(c) - c["max_len"] * c["d_model"]
    return 6 * n + 12 * c["num_layers"] * seq * c["d_model"]
