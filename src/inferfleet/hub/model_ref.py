"""Models named on the command line: a file, a folder, a URL, or a Hub repo's file.

``gguf inspect`` and ``models manifest`` take, besides a path or a URL:

- ``REPO`` (e.g. ``unsloth/gemma-3-270m-it-GGUF``): the repo's model GGUF, the
  one a loader opens (part 1 of a split, L-04; a projector is not it);
- ``REPO:FILE``: one file of the repo; ``REPO:TAG`` (no ``.gguf``), as
  llama.cpp's ``-hf`` writes it: the GGUF whose name holds the tag (``Q4_K_M``);
- ``hf://REPO/FILE`` and ``hf://REPO``;
- each with ``@REVISION`` at the end (branch, tag or commit; default ``main``);
- a local folder: the GGUF in it (part 1 of a split).

A Hub file is read from the Hugging Face cache when huggingface_hub has it
there (``try_to_load_from_cache``: no request at all), else its header is read
over HTTP with Range requests (never the tensor data, L-11). With
``HF_HUB_OFFLINE`` set nothing goes to the network: a file the cache lacks is
a clear error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from inferfleet.artifacts.locate import SPLIT_RE, pick_main
from inferfleet.errors import UsageError
from inferfleet.fleetfile.base import hub_repo_problem, hub_revision_problem
from inferfleet.hub.auth import Token
from inferfleet.hub.errors import HubError
from inferfleet.io.offline import offline

_HF_URL = re.compile(r"^hf://(?P<repo>[^/@:]+/[^/@:]+)(?:/(?P<path>[^@]+))?(?:@(?P<rev>[^@]+))?$")
_SHORT = re.compile(r"^(?P<repo>[^/@:]+/[^/@:]+)(?::(?P<path>[^@]+))?(?:@(?P<rev>[^@]+))?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class HubRef:
    """A repo at a revision, and a file of it (``path``) or a tag naming one (``tag``)."""

    repo: str
    revision: str
    path: str | None = None
    tag: str | None = None

    def __str__(self) -> str:
        what = self.path or self.tag
        return f"{self.repo}{':' + what if what else ''}@{self.revision}"


def parse_ref(text: str) -> HubRef | None:
    """``text`` as a Hub reference, or None when it is not written as one."""
    match = _HF_URL.match(text) or _SHORT.match(text)
    if match is None or hub_repo_problem(match["repo"]) or _CONTROL.search(text):
        return None
    revision = match["rev"] or "main"
    if hub_revision_problem(revision):
        raise UsageError(f"{revision!r} is not a revision", hint="a branch, tag or commit sha")
    path = match["path"]
    if path is not None and (path.startswith("/") or ".." in path.split("/")):
        raise UsageError(
            f"{path!r} is not a file of a repo", hint="write the file's path inside the repo"
        )
    if path is not None and not path.endswith(".gguf") and "/" not in path and "." not in path:
        return HubRef(match["repo"], revision, tag=path)
    return HubRef(match["repo"], revision, path=path)


def gguf_location(text: str, *, endpoint: str) -> str:
    """What the GGUF reader opens for ``text``: a local path or an http(s) URL.

    The token (HF_TOKEN, the login, L-06) is only looked up to list a repo's files.
    """
    if re.match(r"^https?://", text):
        return text
    local = Path(text).expanduser()
    if local.is_dir():
        return str(local / _pick(_listing(local), str(local), None))
    if local.exists():
        return text
    ref = parse_ref(text)
    if ref is None:
        return text  # the reader says "no such file"
    if ref.path is None:
        from inferfleet.hub.auth import resolve_token

        listing = repo_files(ref, endpoint=endpoint, token=None if offline() else resolve_token())
        path = _pick(listing, str(ref), ref.tag)
    else:
        path = ref.path
    return file_location(HubRef(ref.repo, ref.revision, path=path), endpoint=endpoint)


def file_location(ref: HubRef, *, endpoint: str) -> str:
    """The cached copy of ``ref``'s file, else its resolve URL (an error when offline)."""
    from huggingface_hub import hf_hub_url, try_to_load_from_cache

    assert ref.path is not None
    cached = try_to_load_from_cache(ref.repo, ref.path, revision=ref.revision)
    if isinstance(cached, str):
        return cached
    if offline():
        raise HubError(
            f"{ref.repo}/{ref.path}@{ref.revision} is not in the Hugging Face cache and "
            "HF_HUB_OFFLINE is set",
            hint=f"download it first (`hf download {ref.repo} {ref.path} --revision "
            f"{ref.revision}`), or unset HF_HUB_OFFLINE to read its header over the network",
        )
    return str(hf_hub_url(ref.repo, ref.path, revision=ref.revision, endpoint=endpoint))


def cached_snapshot(ref: HubRef) -> Path | None:
    """The Hugging Face cache's snapshot folder of ``ref``'s revision, if there is one."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import IncompleteSnapshotError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(ref.repo, revision=ref.revision, local_files_only=True))
    except IncompleteSnapshotError as exc:
        return Path(exc.snapshot_path) if exc.snapshot_path else None
    except LocalEntryNotFoundError:
        return None


def repo_files(ref: HubRef, *, endpoint: str, token: Token | None) -> list[str]:
    """The repo's file paths at the revision: from the cache offline, else from the Hub."""
    if offline():
        snapshot = cached_snapshot(ref)
        if snapshot is None:
            raise HubError(
                f"{ref.repo}@{ref.revision} is not in the Hugging Face cache and "
                "HF_HUB_OFFLINE is set",
                hint=f"download it first (`hf download {ref.repo}`), or unset HF_HUB_OFFLINE",
            )
        return _listing(snapshot)
    from inferfleet.hub.manifest import call_hub, hub_api

    api = hub_api(endpoint, token)
    files = call_hub(
        lambda: api.list_repo_files(ref.repo, revision=ref.revision), endpoint, ref.repo, token
    )
    return [str(f) for f in files]


def _listing(folder: Path) -> list[str]:
    return sorted(
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*.gguf")
        if not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def _pick(paths: list[str], where: str, tag: str | None) -> str:
    """The GGUF to read among ``paths``: with a tag, among those whose name holds it."""
    ggufs = [p for p in paths if p.endswith(".gguf")]
    chosen = [p for p in ggufs if tag.lower() in Path(p).name.lower()] if tag else ggufs
    main = pick_main(chosen)
    if main is None:
        shown = ", ".join(ggufs[:8]) + (" ..." if len(ggufs) > 8 else "")
        raise UsageError(
            f"{where}: no GGUF file{f' with {tag!r} in its name' if tag else ''}",
            hint=f"name the file (REPO:FILE); GGUF files there: {shown or '(none)'}",
        )
    return main


def manifest_globs(ref: HubRef) -> list[str]:
    """The ``--include`` globs a reference stands for: its file (with every part of a split,
    L-04, and the fragments of a ``.partNofM`` set, L-05), or its tag; none for a whole repo."""
    if ref.tag is not None:
        return [f"*{ref.tag}*"]
    if ref.path is None:
        return []
    match = SPLIT_RE.match(ref.path)
    if match is not None:
        return [f"{glob_escape(match['stem'])}-[0-9][0-9][0-9][0-9][0-9]-of-{match['count']}.gguf"]
    return [glob_escape(ref.path)]


def glob_escape(text: str) -> str:
    """``text`` matched literally by fnmatch (``[`` ``*`` ``?`` in a file name)."""
    return re.sub(r"([\[\]*?])", r"[\1]", text)
