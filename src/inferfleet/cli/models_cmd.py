"""``inferfleet models manifest|fetch|verify``: model files from the Hub, verified.

``manifest`` writes the declared file set of a Hub repo at one commit;
``fetch`` downloads exactly those files (parallel, resumable, hashed while
they stream); ``verify`` checks them (sizes by stat, then sha256 on all
cores). The token comes from HF_TOKEN, huggingface_hub's login or a mode-600
``--token-file``; there is deliberately no option that takes the token
itself (L-06).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

import typer
from rich.progress import Progress, TaskID

from inferfleet.artifacts.locate import model_dir, model_named
from inferfleet.artifacts.verify import FilesRejected, gate
from inferfleet.cli.fleet_cmds import FleetOpt, JsonOpt, OfflineOpt, resolve_fleet, verb_output
from inferfleet.cli.progress import bytes_progress
from inferfleet.documents import (
    FetchedFile,
    FetchFailure,
    ManifestFile,
    ModelsFetchDocument,
    ModelsManifestDocument,
    ModelsVerifyDocument,
    VerifiedFile,
    document_of,
)
from inferfleet.errors import UsageError
from inferfleet.fleetfile.fleet import HubSource
from inferfleet.fleetfile.quantities import format_size
from inferfleet.hub.auth import Token, resolve_token
from inferfleet.hub.download import Retry
from inferfleet.hub.errors import HubError
from inferfleet.hub.fetch import FetchReport, fetch
from inferfleet.hub.fetch_plan import ModelPlan, endpoint, fetch_job, plan_model
from inferfleet.hub.manifest import build_manifest, write_manifest
from inferfleet.output import Output, esc

app = typer.Typer(
    help="Model files: Hub manifests, verified resumable fetch, verify.", no_args_is_help=True
)

EndpointOpt = typer.Option(
    None, "--endpoint", help="Hub endpoint or mirror (default: $HF_ENDPOINT, else the Hub)."
)
TokenFileOpt = typer.Option(
    None,
    "--token-file",
    help="A file holding the Hub token, mode 600 (default: $HF_TOKEN, else `hf auth login`).",
)
JobsOpt = typer.Option(4, "--jobs", "-j", min=1, max=32, help="Files fetched at once.")


@app.command("manifest")
def manifest_cmd(
    repo: str = typer.Argument(
        ...,
        help="A Hub repo (e.g. unsloth/gemma-3-270m-it-GGUF), one file of it (REPO:FILE, "
        "hf://REPO/FILE, REPO:TAG such as Q4_K_M; a split's parts come along), each with an "
        "optional @REVISION, or a local folder (its files hashed). With HF_HUB_OFFLINE set, a "
        "repo is listed from the Hugging Face cache.",
    ),
    revision: str | None = typer.Option(
        None, "--revision", "-r", help="Branch, tag or commit sha (default: @REVISION, else main)."
    ),
    include: list[str] = typer.Option(
        [],
        "--include",
        "-i",
        help="Glob of files to keep (repeatable); fragments count as the file they are cut from.",
    ),
    out_file: Path | None = typer.Option(None, "--out", "-o", help="Write the manifest here."),
    endpoint_opt: str | None = EndpointOpt,
    token_file: Path | None = TokenFileOpt,
    json_out: bool = JsonOpt,
    offline: bool = OfflineOpt,
) -> None:
    """List a repo's files at one commit (or a folder's files): size, hash and kind, path."""
    out = verb_output(offline, json_out)
    from inferfleet.artifacts.folder_manifest import folder_manifest
    from inferfleet.hub.model_ref import cached_snapshot, manifest_globs, parse_ref
    from inferfleet.io.offline import offline as offline_now

    local = Path(repo).expanduser()
    if local.is_dir():
        made = folder_manifest(local, includes=include)
        repo, revision = str(local), ""
    else:
        ref = parse_ref(repo)
        if ref is None:
            raise UsageError(
                f"{repo!r} is neither a folder nor a Hub repo",
                hint="write OWNER/NAME, OWNER/NAME:FILE, hf://OWNER/NAME/FILE[@REVISION] or a "
                "folder",
            )
        if revision is not None and "@" in repo and revision != ref.revision:
            raise UsageError(
                f"two revisions: @{ref.revision} and --revision {revision}", hint="give one"
            )
        revision = revision or ref.revision
        ref = replace(ref, revision=revision)
        includes = [*include, *manifest_globs(ref)]
        repo = ref.repo
        if offline_now():
            snapshot = cached_snapshot(ref)
            if snapshot is None:
                raise HubError(
                    f"{ref.repo}@{revision} is not in the Hugging Face cache and HF_HUB_OFFLINE "
                    "is set",
                    hint=f"download it first (`hf download {ref.repo} --revision {revision}`), "
                    "or unset HF_HUB_OFFLINE to list it on the Hub",
                )
            out.note(f"HF_HUB_OFFLINE: hashing the cached snapshot {esc(snapshot)}")
            made = folder_manifest(
                snapshot, includes=includes, repo=ref.repo, revision=revision, commit=snapshot.name
            )
        else:
            made = build_manifest(
                endpoint=endpoint(endpoint_opt),
                repo=ref.repo,
                revision=revision,
                includes=includes,
                token=resolve_token(token_file=token_file),
                on_note=out.note,
            )
    if out_file is not None:
        write_manifest(out_file, made)
    if json_out:
        out.emit(
            ModelsManifestDocument(
                schema="inferfleet.models.manifest/v1",
                repo=repo,
                revision=revision,
                commit=made.commit,
                out=None if out_file is None else str(out_file),
                files=[
                    ManifestFile(path=e.path, size=e.size, kind=e.kind, hash=e.value)
                    for e in sorted(made.entries, key=lambda e: e.path)
                ],
            )
        )
        return
    if out_file is None:
        typer.echo(made.render(), nl=False)
        return
    total = sum(e.size for e in made.entries if e.kind != "parts")
    out.line(
        f"[green]wrote[/green] {esc(out_file)}: {len(made.entries)} file(s), "
        f"{format_size(total)} at {esc(repo)}{'@' + made.commit if made.commit else ''}"
    )


@app.command("fetch")
def fetch_cmd(
    name: str = typer.Argument(..., help="A model of the fleet file (models: NAME)."),
    file: Path | None = FleetOpt,
    jobs: int = JobsOpt,
    endpoint_opt: str | None = EndpointOpt,
    token_file: Path | None = TokenFileOpt,
    retries: int = typer.Option(
        8, "--retries", min=1, help="Tries in a row without a new byte before a file fails."
    ),
    stall: float = typer.Option(
        60.0, "--stall-timeout", min=1.0, help="Seconds without a byte before a retry."
    ),
    into_hf_cache: bool = typer.Option(
        False,
        "--into-hf-cache",
        help="Download into the Hugging Face cache (HF_HUB_CACHE / HF_HOME), where `hf`, "
        "transformers and llama.cpp -hf find the files, instead of the model's dir "
        "(implied for a model with hf_cache).",
    ),
    json_out: bool = JsonOpt,
    offline: bool = OfflineOpt,
) -> None:
    """Download exactly the model's declared files, verified; resumes where it stopped."""
    out = verb_output(offline, json_out)
    loaded = resolve_fleet(file, out)
    plan = plan_model(loaded, name)
    url = endpoint(endpoint_opt)
    token = resolve_token(token_file=token_file)
    source = plan.model.source
    if isinstance(source, HubSource) and (into_hf_cache or source.hf_cache is not False):
        _fetch_into_cache(out, plan, source, url, token)
        return
    job = fetch_job(plan, endpoint_url=url, token=token)
    out.note(
        f"fetching {esc(name)}: {esc(job.repo)}@{job.revision[:12]} from {esc(url)} "
        f"into {esc(job.folder)}"
    )
    total = sum(t.size for t in job.targets) + sum(a.size for a in job.assemblies)
    events = _ProgressEvents(out, total) if out.human else None
    try:
        report = fetch(
            job,
            token=token,
            jobs=jobs,
            retry=Retry(attempts=retries),
            stall_timeout=stall,
            events=events,
        )
    finally:
        if events is not None:
            events.stop()
    _fetch_summary(out, name, job.repo, job.revision, job.folder, report)
    report.raise_for_failures()


@app.command("verify")
def verify_cmd(
    name: str = typer.Argument(..., help="A model of the fleet file (models: NAME)."),
    file: Path | None = FleetOpt,
    full: bool = typer.Option(False, "--full", help="Hash every file, even unchanged ones."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", min=1, help="Files hashed at once."),
    json_out: bool = JsonOpt,
) -> None:
    """Check the declared files: sizes by stat first, then hashes in parallel."""
    out = Output(json_mode=json_out)
    loaded = resolve_fleet(file, out)
    model = model_named(loaded, name)
    folder = model_dir(name, model)
    progress = _bytes_progress(out, "hashing")
    task: TaskID | None = None

    def on_start(total: int, _files: int) -> None:
        nonlocal task
        if progress is not None:
            task = progress.add_task("hashing", total=total)
            progress.start()

    def on_bytes(count: int) -> None:
        if progress is not None and task is not None:
            progress.advance(task, count)

    # The deploy gate's code path, asked to report every problem, not the first.
    failure: FilesRejected | None = None
    try:
        results = gate(
            name,
            model,
            loaded.root,
            where=str(folder),
            full=full,
            report_all=True,
            jobs=jobs,
            on_bytes=on_bytes,
            on_start=on_start,
        )
    except FilesRejected as exc:
        failure, results = exc, exc.results
    finally:
        if progress is not None:
            progress.stop()
    if json_out:
        out.emit(
            ModelsVerifyDocument(
                schema="inferfleet.models.verify/v1",
                model=name,
                folder=str(folder),
                ok=failure is None,
                files=[document_of(VerifiedFile, c) for c in results],
            )
        )
    else:
        rows = [
            [esc(c.path), format_size(c.size), _status(c.status), c.method, esc(c.detail)]
            for c in results
        ]
        out.table(f"{esc(name)} in {esc(folder)}", ["file", "size", "result", "how", ""], rows)
    if failure is not None:
        raise failure
    out.line(f"[green]ok[/green] {len(results)} declared file(s) verified")


def _fetch_into_cache(
    out: Output, plan: ModelPlan, source: HubSource, url: str, token: Token | None
) -> None:
    """``models fetch`` for the Hugging Face cache: the library downloads, our gate verifies."""
    from inferfleet import paths
    from inferfleet.artifacts.hfcache import library_cache, record_path
    from inferfleet.hub.cache_fetch import fetch_into_cache
    from inferfleet.hub.manifest import resolve_commit

    in_place = source.hf_cache_root is not None
    cache = Path(source.hf_cache_root).expanduser() if source.hf_cache_root else library_cache()
    commit = plan.commit or resolve_commit(
        endpoint=url, repo=source.hub, revision=source.revision, token=token
    )
    out.note(f"fetching {esc(plan.name)}: {esc(source.hub)}@{commit[:12]} into {esc(cache)}")
    started = time.monotonic()
    done = fetch_into_cache(
        name=plan.name,
        repo=source.hub,
        commit=commit,
        entries=plan.entries,
        cache=cache,
        record_at=record_path(source.hub, commit, paths.cache_dir()),
        endpoint=url,
        token=token,
        on_note=out.note,
    )
    seconds = time.monotonic() - started
    status = {p: "downloaded" for p in done.downloaded} | {p: "verified" for p in done.reused}
    if out.json_mode:
        out.emit(
            ModelsFetchDocument(
                schema="inferfleet.models.fetch/v1",
                model=plan.name,
                repo=source.hub,
                commit=commit,
                folder=str(done.snapshot),
                ok=True,
                fetched_bytes=done.downloaded_bytes,
                reused_bytes=done.reused_bytes,
                seconds=round(seconds, 3),
                files=[
                    FetchedFile(
                        path=c.path,
                        size=c.size,
                        status=status[c.path],
                        fetched=c.size if c.path in done.downloaded else 0,
                        reused=c.size if c.path in done.reused else 0,
                        seconds=0.0,
                        sha256=next((e.sha256 for e in plan.entries if e.path == c.path), None),
                    )
                    for c in done.results
                ],
                failures=[],
            )
        )
        return
    out.table(
        f"{esc(plan.name)}: {esc(source.hub)}@{commit[:12]} in {esc(done.snapshot)}",
        ["file", "size", "result"],
        [[esc(c.path), format_size(c.size), status[c.path]] for c in done.results],
    )
    out.line(
        f"[green]verified[/green]: {len(done.results)} file(s) in the Hugging Face cache, "
        f"{format_size(done.downloaded_bytes)} downloaded, "
        f"{format_size(done.reused_bytes)} already there"
    )
    if not in_place:
        out.line(
            f"use them in place: give the model's source `hf_cache: {esc(cache)}` "
            f"and `revision: {commit}`"
        )


def _status(status: str) -> str:
    return "[green]ok[/green]" if status == "ok" else f"[red]{status}[/red]"


def _bytes_progress(out: Output, _what: str) -> Progress | None:
    if not out.human:
        return None
    return bytes_progress(out, binary_units=True)


class _ProgressEvents:
    """Per-file bars and a total (bytes, rate, ETA) on stderr; thread-safe."""

    def __init__(self, out: Output, total: int) -> None:
        progress = _bytes_progress(out, "fetch")
        assert progress is not None
        self.progress = progress
        self.total = self.progress.add_task("total", total=total)
        self.tasks: dict[str, TaskID] = {}
        self.done: dict[str, int] = {}
        self.sizes: dict[str, int] = {}
        self.lock = threading.Lock()
        self.live = False

    def started(self, path: str, size: int) -> None:
        with self.lock:
            if not self.live:
                # Started on the first file, so an error before it leaves no empty bar.
                self.progress.start()
                self.live = True
            self.tasks[path] = self.progress.add_task(esc(path), total=size)
            self.sizes[path] = size
            self.done[path] = 0

    def resumed(self, path: str, have: int) -> None:
        self.note(f"{path}: resuming at {format_size(have)} (re-hashing what is on disk)")

    def advanced(self, path: str, count: int, *, fetched: bool) -> None:
        task = self.tasks.get(path)
        if task is None:
            return
        with self.lock:
            self.done[path] += count
        self.progress.advance(task, count)
        self.progress.advance(self.total, count)

    def restarted(self, path: str) -> None:
        task = self.tasks.get(path)
        if task is None:
            return
        with self.lock:
            lost, self.done[path] = self.done[path], 0
        self.progress.reset(task)
        self.progress.advance(self.total, -lost)

    def finished(self, path: str, status: str) -> None:
        task = self.tasks.get(path)
        if task is None:
            return
        size = self.sizes[path]
        with self.lock:
            rest, self.done[path] = size - self.done[path], size
        self.progress.advance(self.total, rest)
        self.progress.update(task, completed=size, visible=False)
        self.progress.console.print(f"[green]{status}[/green] {esc(path)} ({format_size(size)})")

    def note(self, text: str) -> None:
        self.progress.console.print(f"[yellow]{esc(text)}[/yellow]")

    def stop(self) -> None:
        if self.live:
            self.progress.stop()


def _fetch_summary(
    out: Output, name: str, repo: str, commit: str, folder: Path, report: FetchReport
) -> None:
    if out.json_mode:
        out.emit(
            ModelsFetchDocument(
                schema="inferfleet.models.fetch/v1",
                model=name,
                repo=repo,
                commit=commit,
                folder=str(folder),
                ok=not report.failures,
                fetched_bytes=report.fetched,
                reused_bytes=report.reused,
                seconds=round(report.seconds, 3),
                files=[
                    document_of(FetchedFile, o, seconds=round(o.seconds, 3))
                    for o in sorted(report.outcomes, key=lambda o: o.path)
                ],
                failures=[
                    FetchFailure(path=path, error=error.message, hint=error.hint)
                    for path, error in report.failures
                ],
            )
        )
        return
    rows = [
        [
            esc(o.path),
            format_size(o.size),
            o.status,
            format_size(o.fetched),
            f"{o.seconds:.1f} s",
        ]
        for o in sorted(report.outcomes, key=lambda o: o.path)
    ]
    rows += [[esc(path), "", "[red]failed[/red]", "", ""] for path, _ in report.failures]
    out.table(
        f"{esc(name)}: {esc(repo)}@{commit[:12]} in {esc(folder)}",
        ["file", "size", "result", "downloaded", "time"],
        rows,
    )
    rate = report.fetched / report.seconds if report.seconds > 0 else 0.0
    verdict = (
        "[green]verified[/green]"
        if not report.failures
        else f"[red]{len(report.failures)} failed[/red]"
    )
    out.line(
        f"{verdict}: {len(report.outcomes)} file(s) ok, {format_size(report.fetched)} downloaded "
        f"in {report.seconds:.1f} s ({format_size(int(rate))}/s), "
        f"{format_size(report.reused)} re-used from disk"
    )
