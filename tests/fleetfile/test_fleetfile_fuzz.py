"""Fuzzing the fleet loader (bounded; ``benchmarks/fleet_fuzz.py`` runs it for minutes).

Whatever the bytes, ``parse_fleet`` returns a Fleet or raises a SpecError:
never an OverflowError, RecursionError, ValueError from a YAML constructor
or an "internal error". The mutations aim at the places that broke before:
numbers at the edges (NaN, inf, 1e400, huge integers), YAML tags and
timestamps, aliases and nesting, control characters and unpaired quotes.
"""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fleetfile_errors import BASE

from inferfleet.errors import SpecError
from inferfleet.fleetfile.loader import parse_fleet

PATH = Path("fleet.yaml")

EXTREMES = [
    ".nan", ".inf", "-.inf", "1e400", "-1e400", "1" + "0" * 400, "-1", "0",
    "0x7fffffffffffffffffff", "0o777777777777777777777777", "1_000_000", "9" * 60 + "GiB",
    "1.5e308GiB", "99999999999h", "-0.0",
    '"\\0"', '"\\ud800"', '"\\e[31m"', '"a\\nb"', '"\\x85"', "2001-13-45", "2001-02-30 25:61:61",
    "!!binary x", "!!binary aGk=", "!!int abc", "!!float x", "!!bool maybe", "!!timestamp x",
    "!!python/object:os.system x", "!!set {a, b}", "!!omap [a]", "!!omap [{a: 1}, {a: 2}]",
    "!!pairs [{a: 1}]", "!!str", "!!null x", "!!map []", "!!seq {}", "*undefined", "&a [*a]",
    "&b {k: *b}", "[" * 80 + "]" * 80, "{a: " * 70 + "1" + "}" * 70, "{<<: 1}", "{<<: [1]}",
    "~", "true", "on", "[]", "{}", "'", '"', "|", ">-", "- x", "? [a]", ": x", "%", "@x", "`x`",
    "\t", "é", "\u202e", "\U0001f600", "x" * 5000,
]  # fmt: skip
ALPHABET = ["\n", " ", "  ", "-", ":", "{", "}", "[", "]", "&a", "*a", "<<", "!", "#", "'", '"',
            "\\", "\t", "\r", "\x00", "\x0b", "\x1b", "\x85", "\u2028", "\ufeff", "%", "|", ">",
            ",", "?", "0", "9", "."]  # fmt: skip
KEYS = [
    "port", "parallel", "ctx_per_slot", "memory", "size", "timeout", "index", "tensor_split",
    "gpu_memory_utilization", "restart_sec", "extra_args", "env", "path", "address", "<<",
    "main", "mmproj", "devices", "health", "unit", "container", "speculative", "version",
]  # fmt: skip
NUMERIC_LINES = [
    "    port: 8080", "    parallel: 2", "    ctx_per_slot: 32768", "        memory: 24GiB",
    "        size: 5GiB", "      timeout: 20m",
]  # fmt: skip


def mutate(rng: random.Random, text: str) -> str:
    """One to four edits of the fleet text: values, keys, characters, lines."""
    for _ in range(rng.randint(1, 4)):
        lines = text.split("\n")
        index = rng.randrange(len(lines))
        line = lines[index]
        op = rng.randrange(6)
        if op == 0 and ":" in line:  # replace a value
            key = line.split(":", 1)[0]
            lines[index] = f"{key}: {rng.choice(EXTREMES)}"
        elif op == 1:  # add a key at a random depth
            indent = " " * (2 * rng.randint(0, 3))
            lines.insert(index, f"{indent}{rng.choice(KEYS)}: {rng.choice(EXTREMES)}")
        elif op == 2:  # insert characters
            at = rng.randint(0, len(line))
            lines[index] = (
                line[:at] + "".join(rng.choices(ALPHABET, k=rng.randint(1, 3))) + line[at:]
            )
        elif op == 3:  # delete a stretch
            at = rng.randint(0, len(line))
            lines[index] = line[:at] + line[at + rng.randint(1, 8) :]
        elif op == 4:  # duplicate or drop a line
            if rng.random() < 0.5:
                lines.insert(index, line)
            elif len(lines) > 1:
                del lines[index]
        else:  # an alias or anchor where a value was
            lines[index] = line.replace(
                ": ", rng.choice([": &x ", ": *x ", ": !!str ", ": [", ": {"]), 1
            )
        text = "\n".join(lines)
    return text


def parses_or_refuses(text: str) -> None:
    try:
        parse_fleet(text, PATH)
    except SpecError as exc:
        assert exc.message, "a SpecError says what is wrong"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_mutated_fleet_files_only_raise_spec_errors(rng: random.Random) -> None:
    parses_or_refuses(mutate(rng, BASE))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(ALPHABET + ["a", "b", "hosts", "services"]), max_size=120))
def test_arbitrary_yaml_like_text_only_raises_spec_errors(pieces: list[str]) -> None:
    parses_or_refuses("".join(pieces))


def test_every_extreme_value_in_every_numeric_field() -> None:
    for line in NUMERIC_LINES:
        key = line.split(":")[0]
        for value in EXTREMES:
            parses_or_refuses(BASE.replace(line, f"{key}: {value}"))
