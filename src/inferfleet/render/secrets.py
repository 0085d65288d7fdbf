"""What a secret and a runtime-owned environment name look like (L-06, L-24, L-55).

Shared by the env file and settings renderers, the artifact scan and the
checks, so the renderer refuses exactly what ``check`` reports.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Names that read as secrets: their values belong in an untracked env file (L-55).
_SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_KEY|CREDENTIALS?|ACCESS_KEY)", re.IGNORECASE
)
# Values that are secrets whatever their name: well-known token shapes.
_SECRET_VALUE = re.compile(
    r"(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|"
    r"glpat-[A-Za-z0-9_-]{20,}|xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})"
)
# Credentials written into free text: an Authorization header, a bearer token,
# ``api_key=...`` / ``password: ...``, a password in a URL (L-55).
_CREDENTIAL = re.compile(
    r"authorization\s*:\s*(?:bearer|basic)\s+(?P<header>[^\s'\"]{8,})"
    r"|\bbearer\s+(?P<bearer>(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{12,})"
    r"|\b(?:[A-Za-z0-9]+_)*(?:api[_-]?key|access[_-]?token|token|secret|password|passwd)"
    r"\s*[=:]\s*[\"']?(?P<assigned>[^\s'\"&,;}]{6,})"
    r"|://[^/\s:@]+:(?P<userinfo>[^/\s@]+)@",
    re.IGNORECASE,
)
# What a credential slot holds when the value comes from elsewhere (a variable, a template).
_REFERENCE = ("$", "{", "<", "%", "os.environ/", "env:", "file:")
# Flags that carry a secret on a command line, readable in /proc/<pid>/cmdline (L-06).
SECRET_FLAGS = frozenset({"--api-key", "--hf-token", "-hft", "--token", "--admin-api-key"})

# Names the OS, a shell or a GPU runtime reads by itself. As a *tunable* such a
# name leaks into the runtime: TEMP=1.0 meant for sampling made every HIP load
# segfault (L-24).
GENERIC_NAMES = frozenset(
    {"TEMP", "TMP", "TMPDIR", "HOST", "HOSTNAME", "PATH", "HOME", "USER", "SHELL", "PWD",
     "LANG", "LD_PRELOAD", "LD_LIBRARY_PATH"}
)  # fmt: skip
RUNTIME_PREFIXES = (
    "HIP_", "HSA_", "ROCR_", "ROCM_", "GPU_", "AMD_", "HCC_", "MIOPEN_", "RCCL_",
    "CUDA_", "NVIDIA_", "NCCL_", "GGML_", "LLAMA_ARG_", "VLLM_", "SGLANG_",
    "PYTORCH_", "TORCH_", "TRITON_", "OMP_",
)  # fmt: skip


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def secret_in(text: str) -> str | None:
    """The first token-shaped value in ``text``, or None."""
    match = _SECRET_VALUE.search(text)
    return None if match is None else match.group(0)


def credential_in(text: str) -> str | None:
    """The first key-looking value in ``text``: a token shape, or a credential written into
    free text (a header, ``api_key=...``, a URL password); references to variables are not."""
    token = secret_in(text)
    if token is not None:
        return token
    for match in _CREDENTIAL.finditer(text):
        value = next(v for v in match.groups() if v is not None)
        if not value.startswith(_REFERENCE):
            return value
    return None


def redact(value: str) -> str:
    return value[:4] + "…" if len(value) > 4 else "…"


def runtime_owned(name: str) -> str | None:
    """Why ``name`` must not be a tunable, or None when it is a free name (L-24)."""
    if name.upper() in GENERIC_NAMES:
        return f"{name} is read by the OS and GPU runtimes themselves"
    for prefix in RUNTIME_PREFIXES:
        if name.upper().startswith(prefix):
            return f"{name} is in the {prefix}* namespace a runtime or driver reads"
    return None


def flag_secrets(argv: Iterable[str]) -> list[str]:
    """Secret-carrying flags or token-shaped words in an argv (L-06)."""
    found: list[str] = []
    for word in argv:
        flag = word.split("=", 1)[0]
        if flag in SECRET_FLAGS:
            found.append(flag)
        elif credential_in(word) is not None:
            found.append(redact(word))
    return found
