"""Types shared by every section of the fleet file.

Every string of the fleet file may end up in a systemd unit, a Quadlet file,
an env file or a remote command line. Those formats are line based and have
escapes of their own, so a value carrying a line break (or a NUL, a carriage
return, a vertical tab ...) could add directives of its own: ``Text`` refuses
every control character at the schema, where the loader can still name the
line; the renderers quote what remains.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from inferfleet.text import unsafe_char

NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"
Name = Annotated[str, Field(pattern=NAME_PATTERN)]

Modality = Literal["text", "image", "audio"]
CacheType = Literal[
    "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1",
    # vLLM / SGLang KV cache dtypes (llama.cpp has no fp8 cache).
    "fp8", "fp8_e4m3", "fp8_e5m2",
]  # fmt: skip
# llama.cpp's --spec-type names (common/speculative.cpp, b11434).
SpecType = Literal[
    "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark",
    "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache",
]  # fmt: skip
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
EnvName = Annotated[str, Field(pattern=ENV_NAME_PATTERN, max_length=256)]

MAX_TEXT = 4096  # characters in one value; a unit line stays far below systemd's limits


def _plain_text(value: str) -> str:
    found = unsafe_char(value)
    if found is not None:
        index, label = found
        raise ValueError(
            f"the value has a control character ({label}) at position {index + 1}; "
            "it would reach a unit file, env file or command line -- remove it"
        )
    if len(value) > MAX_TEXT:
        raise ValueError(f"the value is {len(value)} characters long; at most {MAX_TEXT}")
    return value


# A one-line string safe to hand to the renderers (quoted there as each format needs).
Text = Annotated[str, AfterValidator(_plain_text)]


def must_match(pattern: str, what: str) -> Callable[[str], str]:
    """A validator that lets through a value ``pattern`` matches whole and refuses any
    other as ``'<value>' is not <what>``; ``what`` says what a valid value looks like."""
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"{value!r} is not {what}")
        return value

    return check


def _argument(value: str) -> str:
    if value == "":
        # Quadlet's parser drops every word after an empty one.
        raise ValueError("an empty argument; remove it or give the flag a value")
    return value


Argument = Annotated[Text, AfterValidator(_argument)]

# Characters systemd's EnvironmentFile= and podman's --env-file read differently.
_ENV_UNSAFE = re.compile(r"[\"'\\$`]|^\s|\s$")
ENV_UNSAFE_WHAT = "quotes, backslashes, $, backticks or edge whitespace"


def env_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be an env file value as it is, or None."""
    if _ENV_UNSAFE.search(value):
        return f"the value has {ENV_UNSAFE_WHAT}, which systemd and podman read differently"
    return None


def _env_value(value: str) -> str:
    problem = env_value_problem(value)
    if problem is not None:
        raise ValueError(f"{problem}; use a plain value or a settings file")
    return value


EnvValue = Annotated[Text, AfterValidator(_env_value)]


def _health_path(value: str) -> str:
    parts = urlsplit(value)
    if not value.startswith("/") or value.startswith("//") or parts.scheme or parts.netloc:
        raise ValueError(
            f"health.path must be an absolute path such as /health, not {value!r} "
            "(no scheme or host: the check always asks the service itself)"
        )
    if any(ch in value for ch in " \\#{}") or ".." in parts.path.split("/"):
        raise ValueError(
            f"health.path {value!r} has a space, backslash, fragment, brace or '..' segment; "
            "write the plain path the server answers on (the auth proxy's Caddy would read "
            "'{...}' as a placeholder and fill in its environment, keys included)"
        )
    return value


HealthPath = Annotated[Text, AfterValidator(_health_path)]

_address = must_match(
    r"[A-Za-z0-9_.:%@\[\]][A-Za-z0-9_.:%@\[\]-]*",
    "a host address: use a host name, an IP address or an ssh alias "
    "(letters, digits, '.', '-', '_', ':', '@'; never starting with '-')",
)
Address = Annotated[Text, AfterValidator(_address)]


# A Hugging Face repo id (``owner/name``), as huggingface_hub's validate_repo_id reads one:
# no ``..`` or ``--``, no leading '-' or '.'. A repo id reaches cache paths
# (``models--owner--name``), URLs and argv: ``../../x`` or ``-oX`` must never pass.
HUB_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")
# A branch, tag or commit: it names a snapshot folder in the Hub cache.
HUB_REVISION = re.compile(r"^\w[\w./-]{0,199}$")


def hub_repo_problem(value: str) -> str | None:
    """Why ``value`` is not a Hub repo id (``owner/name``), or None."""
    if not HUB_REPO_ID.fullmatch(value) or ".." in value or "--" in value:
        return (
            f"{value!r} is not a Hugging Face repo id: write owner/name (letters, digits, "
            "'_', '-', '.'; no '..' or '--', not starting with '-' or '.')"
        )
    return None


def hub_revision_problem(value: str) -> str | None:
    """Why ``value`` is not a branch, tag or commit name, or None."""
    if not HUB_REVISION.fullmatch(value) or ".." in value.split("/") or value.endswith("/"):
        return f"{value!r} is not a revision: a branch, tag or commit sha (no '..' parts)"
    return None


def _refusing(problem: Callable[[str], str | None]) -> Callable[[str], str]:
    """A validator that refuses a value with the reason ``problem`` gives for it."""

    def check(value: str) -> str:
        found = problem(value)
        if found is not None:
            raise ValueError(found)
        return value

    return check


HubRepoId = Annotated[Text, AfterValidator(_refusing(hub_repo_problem))]
HubRevision = Annotated[Text, AfterValidator(_refusing(hub_revision_problem))]

# An image named by its digest: one exact image, whatever its tags point at later (L-42).
IMAGE_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


# How to fix an image that is not pinned (a tag moves; a fork's later build segfaulted).
PIN_HINT = (
    "pin it: name@sha256:<digest> (`podman inspect --format '{{.Digest}}' IMAGE`; "
    "a tag moves, L-42)"
)


def pinned_image(image: str) -> bool:
    """Whether ``image`` names one exact image by its digest (L-42)."""
    return IMAGE_DIGEST.search(image) is not None


def _pinned_image(value: str) -> str:
    if not pinned_image(value):
        raise ValueError(
            f"image {value!r} is not pinned by digest: write name@sha256:<digest> "
            "(L-42: pin what you run)"
        )
    return value


PinnedImage = Annotated[Text, AfterValidator(_pinned_image)]

# A POSIX user (or group) name, as useradd and systemd's User= accept one, or a
# numeric id. Never starting with '-': an ssh user reaches ssh's argv (``-oProxyCommand=``).
_user_name = must_match(
    r"[A-Za-z_][A-Za-z0-9._-]{0,31}|[0-9]{1,10}",
    "a user name: letters, digits, '_', '.', '-' (starting with a letter or '_', at most 32 "
    "characters), or a numeric id",
)


def _container_user(value: str) -> str:
    # podman's --user: user[:group], each a name or a numeric id.
    for part in value.split(":", 1):
        _user_name(part)
    return value


UserName = Annotated[Text, AfterValidator(_user_name)]
ContainerUser = Annotated[Text, AfterValidator(_container_user)]


def _repo_path(value: str) -> str:
    # A file the renderers read or a host opens from its checkout: it lies in the
    # fleet repository. Symlinks leading out, devices and FIFOs are refused where
    # the file is read (inferfleet.bounded) and by `check`.
    parts = value.split("/")
    if not value or value.startswith(("/", "~")) or ".." in parts or "\\" in value:
        raise ValueError(
            f"{value!r} must be a path relative to the fleet file's folder, inside the fleet "
            "repository (no absolute path, no '~', no '..')"
        )
    return value


RepoPath = Annotated[Text, AfterValidator(_repo_path)]


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("write a finite number (not NaN or infinity)")
    return value


FiniteFloat = Annotated[float, AfterValidator(_finite)]

# A Python package pinned to one exact version (L-42): `runtime install`'s venvs and builds.
_package_name = must_match(
    r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?",
    "a package name (letters, digits, '.', '_', '-')",
)
_exact_version = must_match(
    r"[A-Za-z0-9](?:[A-Za-z0-9.+!_-]{0,62}[A-Za-z0-9])?",
    "one exact version (e.g. 0.32.0; no ranges, spaces or URLs)",
)
PackageName = Annotated[Text, AfterValidator(_package_name)]
ExactVersion = Annotated[Text, AfterValidator(_exact_version)]


# Bounds on counts: far above any real deployment, far below what overflows a float.
MAX_TOKENS = 1 << 24  # 16M tokens of context
MAX_COUNT = 4096  # devices, tensor-parallel ranks, draft tokens


# Where in the fleet file, as pydantic's error locations name it: keys and list indexes.
Loc = tuple[str | int, ...]
# An error between sections, found once each is valid: (where, what, hint); the loader
# points at the line of ``where``.
Ref = tuple[Loc, str, str]


def known(section: str, names: Iterable[str]) -> str:
    """The hint of a reference to a missing name: the names ``section`` has."""
    return f"known {section}: {', '.join(sorted(names)) or '(none)'}"


def absent(loc: Loc, naming: str, section: str, names: Iterable[str]) -> Ref:
    """The error of ``naming`` (who names what) naming something ``section`` lacks."""
    return (loc, f"{naming}, which is not in {section}", known(section, names))


class Strict(BaseModel):
    # A field's docstring is its description (JSON Schema, the reference, editors).
    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, use_attribute_docstrings=True
    )
