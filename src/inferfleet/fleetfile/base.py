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

_ADDRESS = re.compile(r"^[A-Za-z0-9_.:%@\[\]][A-Za-z0-9_.:%@\[\]-]*$")


def _address(value: str) -> str:
    if not _ADDRESS.match(value):
        raise ValueError(
            f"{value!r} is not a host address: use a host name, an IP address or an ssh alias "
            "(letters, digits, '.', '-', '_', ':', '@'; never starting with '-')"
        )
    return value


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


def _hub_repo(value: str) -> str:
    problem = hub_repo_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _hub_revision(value: str) -> str:
    problem = hub_revision_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


HubRepoId = Annotated[Text, AfterValidator(_hub_repo)]
HubRevision = Annotated[Text, AfterValidator(_hub_revision)]

# A POSIX user (or group) name, as useradd and systemd's User= accept one, or a
# numeric id. Never starting with '-': an ssh user reaches ssh's argv (``-oProxyCommand=``).
_USER_RE = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9._-]{0,31}|[0-9]{1,10})$")


def _user_name(value: str) -> str:
    if not _USER_RE.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a user name: letters, digits, '_', '.', '-' (starting with a "
            "letter or '_', at most 32 characters), or a numeric id"
        )
    return value


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
_PACKAGE_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$")
_VERSION_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.+!_-]{0,62}[A-Za-z0-9])?$")


def _package_name(value: str) -> str:
    if not _PACKAGE_RE.fullmatch(value):
        raise ValueError(f"{value!r} is not a package name (letters, digits, '.', '_', '-')")
    return value


def _exact_version(value: str) -> str:
    if not _VERSION_RE.fullmatch(value):
        raise ValueError(
            f"{value!r} is not one exact version (e.g. 0.32.0; no ranges, spaces or URLs)"
        )
    return value


PackageName = Annotated[Text, AfterValidator(_package_name)]
ExactVersion = Annotated[Text, AfterValidator(_exact_version)]


# Bounds on counts: far above any real deployment, far below what overflows a float.
MAX_TOKENS = 1 << 24  # 16M tokens of context
MAX_COUNT = 4096  # devices, tensor-parallel ranks, draft tokens


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
