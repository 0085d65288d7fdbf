"""What a runtime's server binary says about its version, per runtime kind (L-42).

A ``binary:`` runtime is pinned by the string its ``--version`` reports and
the binary's sha256. Running the binary is the caller's effect (the deploy
gate, ``runtime pin``, the llama.cpp build); here is only the argv and the
parsing of what came back, which is hostile text: bounded, one line, no
control characters.
"""

from __future__ import annotations

import re

# Long enough for any real version line; anything longer is not a version.
MAX_VERSION_CHARS = 200
# vLLM and SGLang print the bare package version (after any log lines).
_BARE = re.compile(r"^v?\d+(\.\d+)+([.+-][0-9A-Za-z.+-]*)?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def version_argv(binary: str) -> list[str]:
    """The command that asks a runtime's binary for its version."""
    return [binary, "--version"]


def parse_version(kind: str, output: str) -> str | None:
    """The version a runtime of ``kind`` printed, or None when there is none to read.

    llama.cpp prints ``version: 4589 (a1b2c3d)`` (then the compiler line);
    vLLM and SGLang print the package version, e.g. ``0.8.5.post1``, as the
    last line.
    """
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    found: str | None = None
    if kind == "llama.cpp":
        found = next(
            (ln.removeprefix("version:").strip() for ln in lines if ln.startswith("version:")),
            None,
        )
    else:
        found = next((ln for ln in reversed(lines) if _BARE.match(ln)), None)
    if not found or len(found) > MAX_VERSION_CHARS or _CONTROL.search(found):
        return None
    return found
