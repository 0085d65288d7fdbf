"""A real HTTP server on loopback that speaks the Hugging Face Hub's wire shapes.

Two listeners, as on the real Hub: the *endpoint* (``127.0.0.1``) with the
API and the resolve URLs, and a *CDN* on another address (``127.0.0.2``)
that LFS files redirect to, so a test can tell which host saw the token.

What it does, shape by shape:

- ``GET /api/models/{repo}[/revision/{rev}]``: repo info with the commit sha;
- ``GET /api/models/{repo}/tree/{rev}[/{path}]?recursive=``: the tree, paged
  with a ``Link: <...>; rel="next"`` header like the Hub's;
- ``HEAD|GET /{repo}/resolve/{rev}/{path}``: LFS files answer ``302`` to the
  CDN with ``X-Linked-Size`` and ``X-Linked-Etag`` (the sha256); non-LFS
  files answer ``307`` to ``/api/resolve-cache/...`` with a ~250-byte page
  and no ``X-Linked-Size`` (L-02);
- the CDN's ETag is a CAS-style hash, *not* the sha256 (Xet), it supports
  Range and answers ``400`` to ``Range: bytes=0-`` (L-03);
- auth: private repos answer 401, gated repos 401 without a token and 403
  with a token whose account has not accepted the gate, an unknown token 401
  ``Invalid credentials``; all with ``X-Error-Code`` / ``X-Error-Message``.

Faults are knobs on :class:`Faults`, each consumed per request: bursts of
500, bodies dropped after N bytes, one flipped byte with the right length,
a 200 answered to a Range request, a stall, a slow (rate-limited) body, an
error body with an error status. Every request is logged (host, method,
path, Range, whether it carried a token) and body bytes are counted.
"""

from __future__ import annotations

import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

from hub_content import Blob, Faults, Logged, Repo, RepoFile, Segment, git_blob_id
from hub_http import Base, QuietServer

__all__ = ["Blob", "Faults", "HubServer", "Logged", "Repo", "RepoFile", "Segment", "git_blob_id"]


class HubServer:
    """Start with ``with HubServer() as hub:``; add repos with :meth:`add`."""

    def __init__(
        self, *, tokens: dict[str, set[str] | None] | None = None, idle_timeout: float = 60.0
    ) -> None:
        # token -> repos it may read (None: every repo); gate acceptance separately.
        self.tokens: dict[str, set[str] | None] = tokens or {}
        self.accepted: dict[str, set[str]] = {}  # repo -> tokens whose account accepted
        self.repos: dict[str, Repo] = {}
        self.faults = Faults()
        self.page_size = 1000
        self.log: list[Logged] = []
        self.sent: dict[str, int] = {}  # repo path -> body bytes sent (all hosts)
        self.flowing = threading.Event()  # cleared: bodies pause between slices
        self.flowing.set()
        self.lock = threading.Lock()
        self._servers: list[ThreadingHTTPServer] = []
        self.idle_timeout = idle_timeout  # a socket that moves nothing for this long is closed
        self.endpoint = ""
        self.cdn = ""

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> HubServer:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> None:
        hub = self._listen("127.0.0.1", _HubHandler)
        cdn = self._listen("127.0.0.2", _CdnHandler)
        self.endpoint = f"http://127.0.0.1:{hub.server_address[1]}"
        self.cdn = f"http://127.0.0.2:{cdn.server_address[1]}"

    def _listen(self, host: str, handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
        server = QuietServer((host, 0), handler)
        server.daemon_threads = True
        server.hub = self  # type: ignore[attr-defined]
        threading.Thread(
            target=server.serve_forever, args=(0.05,), name=f"hub {host}", daemon=True
        ).start()
        self._servers.append(server)
        return server

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers.clear()

    # ------------------------------------------------------------ content
    def add(self, repo: Repo) -> Repo:
        for item in repo.files.values():
            item.blob.hashed()
        self.repos[repo.repo_id] = repo
        return repo

    def requests(self, host: str | None = None, path_part: str = "") -> list[Logged]:
        with self.lock:
            return [
                r
                for r in self.log
                if (host is None or r.host == host) and path_part in unquote(r.path)
            ]

    def resolve_url(self, repo: str, path: str, revision: str = "main") -> str:
        return f"{self.endpoint}/{repo}/resolve/{revision}/{quote(path)}"

    def _record(self, entry: Logged) -> None:
        with self.lock:
            self.log.append(entry)

    def _count(self, path: str, n: int) -> None:
        with self.lock:
            self.sent[path] = self.sent.get(path, 0) + n

    def _take(self, name: str, repo_path: str) -> object:
        """Consume one unit of a fault knob (None/0 when none is left)."""
        with self.lock:
            if self.faults.paths is not None and repo_path not in self.faults.paths:
                return None
            value = getattr(self.faults, name)
            if isinstance(value, list):
                return value.pop(0) if value else None
            if isinstance(value, int) and value > 0:
                setattr(self.faults, name, value - 1)
                return True
            return None


_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
_CACHE = re.compile(
    r"^/api/resolve-cache/models/(?P<repo>[^/]+/[^/]+)/(?P<rev>[^/]+)/(?P<path>.+)$"
)
_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/revision/(?P<rev>[^/]+))?$")
_TREE = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?$")


class _HubHandler(Base):
    host_name = "hub"

    def route(self) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        hub = self.hub
        for pattern, method in (
            (_RESOLVE, self.resolve),
            (_CACHE, self.resolve_cache),
            (_TREE, self.tree),
            (_INFO, self.info),
        ):
            match = pattern.match(path)
            if match is None:
                continue
            repo = hub.repos.get(match["repo"])
            if repo is None:
                self.error(
                    401 if self.token() is None else 404, "RepoNotFound", "Repository not found"
                )
                return
            if not self.allowed(repo, files=pattern in (_RESOLVE, _CACHE)):
                return
            rev = match["rev"] or "main"
            commit = repo.branches.get(rev) or (rev if rev in repo.branches.values() else None)
            if commit is None:
                self.error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
                return
            method(repo, commit, match.groupdict().get("path") or "", parse_qs(parts.query))
            return
        self.reply(404, b"Not Found")

    def allowed(self, repo: Repo, *, files: bool) -> bool:
        """The Hub's auth answers: 401 unknown token, 401/403 gate, 401 private."""
        hub = self.hub
        token = self.token()
        if token is not None and token not in hub.tokens:
            self.error(401, "", "Invalid credentials in Authorization header")
            return False
        scope = hub.tokens.get(token) if token is not None else set()
        can_read = token is not None and (scope is None or repo.repo_id in scope)
        if repo.private and not can_read:
            self.error(401, "RepoNotFound", "Repository not found")
            return False
        if repo.gated and files:
            if token is None:
                self.error(
                    401,
                    "GatedRepo",
                    f"Access to model {repo.repo_id} is restricted. You must have access to it "
                    "and be authenticated to access it. Please log in.",
                )
                return False
            if token not in hub.accepted.get(repo.repo_id, set()):
                self.error(
                    403,
                    "GatedRepo",
                    f"Access to model {repo.repo_id} is restricted and you are not in the "
                    "authorized list. Visit https://huggingface.co/"
                    f"{repo.repo_id} to ask for access.",
                )
                return False
        return True

    def info(self, repo: Repo, commit: str, _path: str, _query: dict[str, list[str]]) -> None:
        self.reply_json(
            {
                "_id": repo.commit[:24],
                "id": repo.repo_id,
                "modelId": repo.repo_id,
                "sha": commit,
                "private": repo.private,
                "gated": "manual" if repo.gated else False,
                "siblings": [{"rfilename": p} for p in sorted(repo.files)],
            }
        )

    def tree(self, repo: Repo, commit: str, path: str, query: dict[str, list[str]]) -> None:
        recursive = query.get("recursive", ["false"])[0].lower() in ("true", "1")
        prefix = f"{path.strip('/')}/" if path.strip("/") else ""
        entries: list[dict[str, object]] = []
        folders: set[str] = set()
        for name in sorted(repo.files):
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix) :]
            if "/" in rest:
                folder = prefix + rest.split("/")[0]
                if folder not in folders:
                    folders.add(folder)
                    entries.append(
                        {"type": "directory", "oid": "0" * 40, "size": 0, "path": folder}
                    )
                if not recursive:
                    continue
            item = repo.files[name]
            entry: dict[str, object] = {
                "type": "file",
                "oid": item.git_oid,
                "size": item.blob.size,
                "path": name,
            }
            if item.lfs:
                entry["lfs"] = {"oid": item.blob.sha256, "size": item.blob.size, "pointerSize": 134}
                entry["xetHash"] = item.cas
            entries.append(entry)
        if not entries and prefix:
            self.error(404, "EntryNotFound", f"{path} does not exist")
            return
        cursor = int(query.get("cursor", ["0"])[0])
        page = entries[cursor : cursor + self.hub.page_size]
        headers = {}
        if cursor + self.hub.page_size < len(entries):
            base = f"{self.hub.endpoint}{urlsplit(self.path).path}"
            flag = "true" if recursive else "false"
            link = f"{base}?recursive={flag}&cursor={cursor + self.hub.page_size}"
            headers["Link"] = f'<{link}>; rel="next"'
        self.reply_json(page, headers)

    def resolve(self, repo: Repo, commit: str, path: str, _query: dict[str, list[str]]) -> None:
        hub = self.hub
        item = repo.files.get(path)
        if item is None:
            self.error(404, "EntryNotFound", f"{path} does not exist at {commit}")
            return
        if hub._take("resolve_500", path):
            self.reply(500, b"Internal Error - We're working hard to fix this as soon as possible!")
            return
        common = {"X-Repo-Commit": commit}
        if item.lfs:
            location = (
                f"{hub.cdn}/xet/{item.cas}?X-Xet-Signed-Range=bytes&Signature={os.urandom(6).hex()}"
            )
            body = f"Found. Redirecting to {location}".encode()
            self.reply(
                302,
                body,
                {
                    **common,
                    "Location": location,
                    "X-Linked-Size": str(item.blob.size),
                    "X-Linked-Etag": f'"{item.blob.sha256}"',
                    "ETag": f'"{item.blob.sha256}"',
                },
            )
            return
        # Non-LFS on a Xet-backed repo: 307 to another resolve path, and the
        # Content-Length is this ~250-byte page, not the file (L-02).
        location = f"/api/resolve-cache/models/{repo.repo_id}/{commit}/{quote(path)}"
        body = f"Temporary Redirect. Redirecting to {location}".encode().ljust(250, b" ")
        self.reply(307, body, {**common, "Location": location})

    def resolve_cache(
        self, repo: Repo, commit: str, path: str, _query: dict[str, list[str]]
    ) -> None:
        item = repo.files.get(path)
        if item is None or item.lfs:
            self.error(404, "EntryNotFound", f"{path} does not exist at {commit}")
            return
        # The Hub names the commit here too; huggingface_hub reads it after the 307.
        self.serve_blob(item, item.git_oid, cdn=False, extra={"X-Repo-Commit": commit})


class _CdnHandler(Base):
    host_name = "cdn"

    def route(self) -> None:
        parts = urlsplit(self.path)
        match = re.fullmatch(r"/xet/([0-9a-f]{64})", parts.path)
        if match is None or "Signature" not in parse_qs(parts.query):
            self.reply(403, b"<Error><Code>AccessDenied</Code></Error>")
            return
        for repo in self.hub.repos.values():
            for item in repo.files.values():
                if item.lfs and item.cas == match[1]:
                    self.serve_blob(item, item.cas, cdn=True)
                    return
        self.reply(404, b"<Error><Code>NoSuchKey</Code></Error>")
