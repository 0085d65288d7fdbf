"""The long fuzz run of the GGUF reader: 100,000+ mutated headers, exceptions by type, peak RSS.

Run: .venv/bin/python benchmarks/gguf_fuzz.py [--cases N] [--seed S]

The bounded hypothesis run lives in ``tests/gguf/test_gguf_fuzz.py``;
this one reuses its inputs and mutations (the real model's first MiB, the
real header re-encoded with every tensor info, the builder's synthetic
files) with a seeded ``random`` instead of hypothesis, so 100,000 cases fit
in minutes. Goal: no exception other than ``GGUFError`` (and the
budget's ``BudgetError`` for a header that cannot be sized), peak RSS below
200 MB. Exits 1 on any other exception, printing the first input that raised it.
"""

from __future__ import annotations

import argparse
import collections
import random
import resource
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests/gguf")]

from fixtures.gguf_builder import (  # noqa: E402
    ARRAY,
    BOOL,
    F32,
    FLOAT32,
    Q4_0,
    Q8_0,
    STRING,
    UINT32,
    UINT64,
    GGUFBuilder,
    gemma3_like,
)
from results import Row, record  # noqa: E402
from test_gguf_fuzz import (  # noqa: E402
    EXTREMES,
    GEMMA,
    mutate,
    real_header_small,
    real_prefix,
)

from inferfleet.budget import BudgetError, ContextShape, context_memory, model_shape  # noqa: E402
from inferfleet.gguf import GGUFError, read_header_bytes  # noqa: E402
from inferfleet.gguf.split import build_inspection  # noqa: E402

OPS = ["overwrite", "truncate", "insert", "delete", "u64", "u32"]
KEYS = [
    "block_count", "attention.head_count", "attention.head_count_kv", "attention.key_length",
    "attention.value_length", "attention.sliding_window", "embedding_length",
    "nextn_predict_layers", "ssm.inner_size", "ssm.state_size", "full_attention_interval",
]  # fmt: skip


def synthetic(rng: random.Random) -> bytes:
    """A small random header: an architecture, a few keys (scalars or arrays), tensors."""
    arch = rng.choice(["gemma3", "llama", "qwen35", "mamba", "deepseek2", "x"])
    b = GGUFBuilder(version=rng.choice([2, 3]))
    b.kv("general.architecture", STRING, arch)
    for key in rng.sample(KEYS, rng.randint(0, len(KEYS))):
        if rng.random() < 0.3:
            b.kv(f"{arch}.{key}", ARRAY, (UINT32, [rng.randint(0, 64) for _ in range(4)]))
        elif rng.random() < 0.1:
            b.kv(f"{arch}.{key}", rng.choice([BOOL, FLOAT32]), rng.choice([True, 0.5]))
        else:
            b.kv(f"{arch}.{key}", rng.choice([UINT32, UINT64]), rng.choice([0, 1, 8, 64, 512]))
    for i in range(rng.randint(0, 6)):
        dims = tuple(rng.choice([1, 32, 64, 256]) for _ in range(rng.randint(1, 4)))
        b.tensor(f"blk.{i}.w", dims, rng.choice([F32, Q4_0, Q8_0]))
    built: bytes = b.build(data=False)
    return built


def random_ops(rng: random.Random, size: int) -> list[tuple[str, int, bytes | int]]:
    ops: list[tuple[str, int, bytes | int]] = []
    for _ in range(rng.randint(1, 4)):
        # Half the mutations hit the first 4 KiB: counts, keys and the first values.
        where = rng.randrange(4096) if rng.random() < 0.5 else rng.randrange(size + 1)
        arg: bytes | int
        if rng.random() < 0.5:
            arg = rng.randbytes(rng.randint(1, 8))
        else:
            arg = rng.choice(EXTREMES) if rng.random() < 0.7 else rng.getrandbits(64)
        ops.append((rng.choice(OPS), where, arg))
    return ops


def run_case(data: bytes) -> str:
    """The outcome of one case: "ok" or the exception type's name."""
    try:
        header = read_header_bytes(data, name="<fuzz>")
        result = build_inspection("<fuzz>", [header])
        result.layer_bytes()
        if result.layout is not None:
            result.kv_bytes_per_token("q8_0", "q4_0")
            result.kv_bytes(8192, parallel=2)
        context_memory(model_shape(result), ContextShape(4096, 2))
    except (GGUFError, BudgetError) as exc:
        return type(exc).__name__
    return "ok"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    seeds: list[tuple[str, bytes, float]] = [("gemma3_like", gemma3_like().build(), 0.15)]
    if GEMMA.is_file():
        seeds += [("real prefix (1 MiB)", real_prefix(), 0.05)]
        seeds += [("real header re-encoded", real_header_small(), 0.4)]
    else:
        print(f"{GEMMA} not found: fuzzing synthetic headers only")
    outcomes: collections.Counter[str] = collections.Counter()
    by_seed: collections.Counter[str] = collections.Counter()
    unexpected: dict[str, tuple[bytes, str]] = {}
    start = time.perf_counter()
    for _ in range(args.cases):
        draw = rng.random()
        name, base = "synthetic", b""
        for seed_name, data, share in seeds:
            draw -= share
            if draw < 0:
                name, base = seed_name, data
                break
        if not base:
            base = synthetic(rng)
        data = mutate(base, random_ops(rng, len(base)))
        by_seed[name] += 1
        try:
            outcomes[run_case(data)] += 1
        except Exception as exc:  # noqa: BLE001 - counting what the reader must never raise
            kind = type(exc).__name__
            outcomes[kind] += 1
            unexpected.setdefault(kind, (data, traceback.format_exc()))
    elapsed = time.perf_counter() - start
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.cases:,} cases in {elapsed:.1f} s ({args.cases / elapsed:,.0f}/s), seed {args.seed}"
    )
    print("inputs:   " + ", ".join(f"{k} {v:,}" for k, v in by_seed.most_common()))
    print("outcomes: " + ", ".join(f"{k} {v:,}" for k, v in outcomes.most_common()))
    print(f"peak RSS: {peak_mib:.0f} MiB (goal < 200 MB = {200e6 / (1 << 20):.0f} MiB)")
    for kind, (data, trace) in unexpected.items():
        print(f"\nUNEXPECTED {kind} on {len(data)} bytes starting {data[:64]!r}:\n{trace}")
    ok = not unexpected and peak_mib * (1 << 20) < 200e6
    record(
        "gguf_fuzz",
        {
            "cases": args.cases,
            "cases_per_s": args.cases / elapsed,
            "unexpected_exceptions": sum(outcomes[kind] for kind in unexpected),
            "peak_rss_mib": peak_mib,
        },
        rows=[
            Row(
                "unexpected_exceptions",
                "cases raising other than GGUFError/BudgetError",
                "cases",
                True,
                target=0,
            ),
            Row("peak_rss_mib", "peak RSS", "MiB", True, target=round(200e6 / (1 << 20), 1)),
            Row("cases_per_s", "mutated headers read per second", "cases/s", False),
        ],  # fmt: skip
        notes={"seed": args.seed, "outcomes": dict(outcomes)},
    )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
