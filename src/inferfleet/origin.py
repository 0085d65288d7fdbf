"""Where this inferfleet came from, as a pip requirement another machine can install.

``init`` writes CI that installs inferfleet the way it was installed here (L-42: pin
what you run): a git install or a checkout with a remote as ``inferfleet @
git+URL@COMMIT``; an install from a package index as ``inferfleet==VERSION``. A
checkout without a remote, or a wheel file, is not reachable from CI: the caller
says so and names ``--install``.

What pip recorded (``direct_url.json``, PEP 610) and what git prints are outside
input: bounded, typed, and refused when they carry characters a workflow's YAML
or a shell line must not (a URL with a quote or a newline).
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlsplit

from inferfleet import __version__
from inferfleet.errors import UsageError

MAX_SPEC = 500
# A requirement a CI line carries inside double quotes: no quote, backslash, `$`,
# backtick, whitespace or control character.
_SAFE = re.compile(r"[A-Za-z0-9_.+\-=@:/~%,!<>\[\]]+")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True)
class Origin:
    spec: str  # what `pip install "SPEC"` takes
    reachable: bool  # False: a local path or file CI cannot reach (spec is the index form)
    where: str  # how it was installed, in words


def checked_spec(spec: str) -> str:
    """``spec`` when it is one safe requirement (the ``--install`` value), else a UsageError."""
    if not spec or len(spec) > MAX_SPEC or not _SAFE.fullmatch(spec.replace(" @ ", "@")):
        raise UsageError(
            f"--install {spec[:80]!r}: not one pip requirement a CI line can carry",
            hint='e.g. --install "inferfleet @ git+https://git.example/inferfleet@COMMIT" or '
            "--install inferfleet==0.1.0 (no quotes, spaces or control characters)",
        )
    return spec


def origin(dist: str = "inferfleet") -> Origin:
    """How the installed ``dist`` can be installed again elsewhere."""
    index = Origin(f"inferfleet=={__version__}", True, "from a package index")
    try:
        text = metadata.distribution(dist).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return index
    if text is None:
        return index
    return from_direct_url(text[:65536])


def from_direct_url(text: str) -> Origin:
    """The origin PEP 610's ``direct_url.json`` describes (its text)."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    fallback = Origin(f"inferfleet=={__version__}", False, "from an unreadable direct_url.json")
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return fallback
    url: str = data["url"]
    vcs = data.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs") == "git":
        commit = vcs.get("commit_id")
        if isinstance(commit, str) and _COMMIT.fullmatch(commit):
            return _git(url, commit, f"from git ({url})")
        return fallback
    parts = urlsplit(url)
    if parts.scheme == "file" and isinstance(data.get("dir_info"), dict):
        return from_checkout(Path(unquote(parts.path)))
    return Origin(f"inferfleet=={__version__}", False, f"from {url[:200]}")


def from_checkout(path: Path) -> Origin:
    """A source checkout: its ``origin`` remote at its HEAD commit, when it has both."""
    local = Origin(f"inferfleet=={__version__}", False, f"from the checkout {path}")
    remote = _git_out(path, "remote", "get-url", "origin")
    commit = _git_out(path, "rev-parse", "HEAD")
    if remote is None or commit is None or not _COMMIT.fullmatch(commit):
        return local
    scheme = urlsplit(remote).scheme
    if scheme in ("", "file") and not re.match(r"[\w.\-]+@[\w.\-]+:", remote):
        return local  # a path on this machine: CI cannot clone it
    if "@" in remote.split("//", 1)[-1].split("/", 1)[0] and scheme in ("http", "https"):
        return local  # credentials in the URL never go into a workflow file
    if re.match(r"[\w.\-]+@[\w.\-]+:", remote):  # scp-like git@host:path
        user_host, path_part = remote.split(":", 1)
        remote = f"ssh://{user_host}/{path_part}"
    return _git(remote, commit, f"from the checkout {path} (remote {remote})")


def _git(url: str, commit: str, where: str) -> Origin:
    url = url.removeprefix("git+")
    spec = f"inferfleet @ git+{url}@{commit}"
    try:
        return Origin(checked_spec(spec), True, where)
    except UsageError:
        return Origin(f"inferfleet=={__version__}", False, where)


def _git_out(path: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(path), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = done.stdout.strip()
    return value if done.returncode == 0 and value and len(value) <= MAX_SPEC else None
