"""Fetch against a misbehaving Hub: errors (L-01, L-07), redirects (L-02), ranges (L-03),
bursts of 500, dropped connections, wrong bytes, stalls. Each file is either verified or
absent: never a half-written file, never an error body, never wrong bytes marked verified."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hub_repos import SMALL_SIZE, small_repo
from hub_tokens import GOOD_TOKEN, SCOPED_TOKEN
from hubserver import Blob, HubServer, Repo, RepoFile

from inferfleet.artifacts.record import Record
from inferfleet.errors import AuthError, GatedError
from inferfleet.hub.auth import Token
from inferfleet.hub.download import CHUNK
from inferfleet.hub.errors import FetchError, IntegrityError
from inferfleet.hub.fetch import FetchJob, FetchReport, fetch
from inferfleet.hub.fetch_plan import split_entries
from inferfleet.hub.manifest import build_manifest
from inferfleet.io.retry import Retry

FAST = Retry(attempts=4, base=0.01, cap=0.05)
MODEL = "model-small.gguf"


def job_for(hub: HubServer, repo: Repo, folder: Path, token: Token | None = None) -> FetchJob:
    manifest = build_manifest(
        endpoint=hub.endpoint, repo=repo.repo_id, revision="main", includes=[], token=token
    )
    targets, assemblies = split_entries(manifest.entries)
    assert manifest.commit is not None
    return FetchJob(
        hub.endpoint, repo.repo_id, manifest.commit, folder, tuple(targets), tuple(assemblies)
    )


def run(job: FetchJob, token: Token | None = None, **kwargs: object) -> FetchReport:
    options: dict[str, object] = {"retry": FAST, "stall_timeout": 5.0, "jobs": 2, **kwargs}
    return fetch(job, token=token, **options)  # type: ignore[arg-type]


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != ".inferfleet-fetch.lock")


def assert_verified(folder: Path, repo: Repo) -> None:
    for name, item in repo.files.items():
        data = (folder / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == item.blob.sha256, name


def cdn_gets(hub: HubServer) -> list[str | None]:
    return [r.range for r in hub.requests("cdn") if r.method == "GET"]


@pytest.fixture
def repo(hub: HubServer) -> Repo:
    return hub.add(small_repo())


def test_error_status_never_becomes_the_artifact_L01(
    hub: HubServer, repo: Repo, tmp_path: Path
) -> None:
    job = job_for(hub, repo, tmp_path / "m")
    hub.faults.cdn_error = [(403, b"<Error><Code>AccessDenied</Code><Message>x</Message></Error>")]
    with pytest.raises(AuthError, match="HTTP 403"):
        run(job)
    assert MODEL not in files_in(job.folder)
    assert not list(job.folder.glob(f"{MODEL}*"))


def test_error_page_with_200_is_not_written_L01(hub: HubServer, repo: Repo, tmp_path: Path) -> None:
    job = job_for(hub, repo, tmp_path / "m")
    page = b"<html><body>Sign in to download this file</body></html>".ljust(150)
    hub.faults.cdn_wrong_body = [page, page]
    report = run(job)
    assert [path for path, _ in report.failures] == [MODEL]
    error = report.failures[0][1]
    assert isinstance(error, IntegrityError)
    assert "answers 150 bytes" in error.message and "nothing was written" in error.message
    assert files_in(job.folder) == [".inferfleet-verified.json", "README.md"]


def test_cdn_etag_is_not_the_sha256_and_is_not_used_L02(
    hub: HubServer, repo: Repo, tmp_path: Path
) -> None:
    job = job_for(hub, repo, tmp_path / "m")
    report = run(job)
    assert not report.failures
    assert_verified(job.folder, repo)
    item = repo.files[MODEL]
    assert item.cas != item.blob.sha256  # the CDN's ETag
    # The non-LFS file went through the 307 and its real size was used.
    assert [r.status for r in hub.requests("hub", "README.md") if r.method == "GET"] == [307, 200]


def test_a_new_file_gets_no_range_header_and_a_resume_asks_for_the_rest_L03(
    hub: HubServer, repo: Repo, tmp_path: Path
) -> None:
    job = job_for(hub, repo, tmp_path / "m")
    hub.faults.paths = {MODEL}
    hub.faults.drop_after = [1 << 20]
    report = run(job)
    assert not report.failures
    ranges = cdn_gets(hub)
    assert ranges[0] is None  # the CDN answers 400 to bytes=0-
    assert len(ranges) == 2 and ranges[1] is not None
    resumed_at = int(ranges[1].removeprefix("bytes=").removesuffix("-"))
    assert 0 < resumed_at <= 1 << 20
    assert hub.sent[MODEL] - SMALL_SIZE <= CHUNK  # the prefix was not fetched again
    assert_verified(job.folder, repo)


def test_partial_from_an_earlier_run_is_rehashed_not_refetched(
    hub: HubServer, repo: Repo, tmp_path: Path
) -> None:
    job = job_for(hub, repo, tmp_path / "m")
    hub.faults.paths = {MODEL}
    hub.faults.drop_after = [2 << 20] * 10
    first = run(job, retry=Retry(attempts=1, base=0.01))
    assert isinstance(first.failures[0][1], FetchError)
    partial = next(job.folder.glob(f"{MODEL}.*.partial"))
    kept = partial.stat().st_size
    assert 0 < kept <= 2 << 20
    hub.faults.drop_after = []
    report = run(job)
    outcome = next(o for o in report.outcomes if o.path == MODEL)
    assert (outcome.status, outcome.reused, outcome.fetched) == (
        "resumed",
        kept,
        SMALL_SIZE - kept,
    )
    assert_verified(job.folder, repo)


def test_a_200_answered_to_a_range_restarts_from_that_body(
    hub: HubServer, repo: Repo, tmp_path: Path
) -> None:
    job = job_for(hub, repo, tmp_path / "m")
    hub.faults.paths = {MODEL}
    hub.faults.drop_after = [1 << 20]
    hub.faults.ignore_range = 1
    report = run(job)
    assert not report.failures
    assert cdn_gets(hub)[1] is not None  # asked for a range, got the whole file
    assert hub.sent[MODEL] <= SMALL_SIZE + (1 << 20)
    assert_verified(job.folder, repo)


def test_bursts_of_500_are_retried(hub: HubServer, repo: Repo, tmp_path: Path) -> None:
    job = job_for(hub, repo, tmp_path / "m")
    hub.faults.cdn_500 = 3
    hub.faults.resolve_500 = 2
    report = run(job, jobs=1, retry=Retry(attempts=6, base=0.01, cap=0.05))
    assert not report.failures
    assert [r.status for r in hub.requests("cdn") if r.method == "GET"] == [500, 500, 500, 200]
    assert [r.status for r in hub.requests("hub", MODEL) if r.method == "GET"][:2] == [500, 500]
    assert_verified(job.folder, repo)


def test_endless_500s_give_up_after_bounded_tries(
    hub: HubServer, repo: Repo, tmp_path: Path
) -> None:
    job = job_for(hub, repo, tmp_path / "m")
    hub.faults.cdn_500 = 1000
    report = run(job)
    assert [path for path, _ in report.failures] == [MODEL]
    assert "gave up after 4 attempts" in report.failures[0][1].message
    assert len(cdn_gets(hub)) == FAST.attempts
    assert MODEL not in files_in(job.folder) and not list(job.folder.glob("*.partial"))


def test_wrong_bytes_with_the_right_length_are_fetched_again(
    hub: HubServer, repo: Repo, tmp_path: Path
) -> None:
    job = job_for(hub, repo, tmp_path / "m")
    hub.faults.paths = {MODEL}
    hub.faults.corrupt = 1
    report = run(job)
    assert not report.failures
    assert hub.sent[MODEL] == 2 * SMALL_SIZE
    assert_verified(job.folder, repo)


def test_wrong_bytes_twice_fail_and_nothing_is_marked_verified(
    hub: HubServer, repo: Repo, tmp_path: Path
) -> None:
    job = job_for(hub, repo, tmp_path / "m")
    hub.faults.paths = {MODEL}
    hub.faults.corrupt = 2
    report = run(job)
    error = report.failures[0][1]
    assert isinstance(error, IntegrityError) and "twice" in error.message
    assert "Nothing was marked verified" in error.hint
    assert MODEL not in files_in(job.folder) and not list(job.folder.glob("*.partial"))
    record = json.loads((job.folder / ".inferfleet-verified.json").read_text())
    assert set(record) == {"README.md"}
    assert not Record(job.folder).recorded_sha256(MODEL)


def test_a_stalled_body_times_out_and_resumes(hub: HubServer, repo: Repo, tmp_path: Path) -> None:
    job = job_for(hub, repo, tmp_path / "m")
    hub.faults.paths = {MODEL}
    hub.faults.stall = [(512 << 10, 3.0)]
    report = run(job, stall_timeout=0.5)
    assert not report.failures
    ranges = cdn_gets(hub)
    assert len(ranges) == 2 and ranges[1] is not None
    assert_verified(job.folder, repo)


def test_a_slow_server_is_still_fetched(hub: HubServer, repo: Repo, tmp_path: Path) -> None:
    job = job_for(hub, repo, tmp_path / "m")
    hub.faults.rate = 8e6
    report = run(job)
    assert not report.failures
    assert_verified(job.folder, repo)


def gated_job(hub: HubServer, repo: Repo, folder: Path) -> FetchJob:
    """The manifest was written while the account had access; it has none now."""
    repo.gated = False
    job = job_for(hub, repo, folder)
    repo.gated = True
    hub.log.clear()
    return job


def test_gated_repo_is_one_request_and_the_exact_fix_L07(hub: HubServer, tmp_path: Path) -> None:
    repo = hub.add(small_repo("test/gated", gated=True, extra=2))
    token = Token(GOOD_TOKEN, "HF_TOKEN")
    job = gated_job(hub, repo, tmp_path / "m")
    with pytest.raises(GatedError) as info:
        run(job, token, jobs=1)
    assert "has not been granted access" in info.value.message
    assert f"{hub.endpoint}/test/gated" in info.value.hint and "accept the terms" in info.value.hint
    gets = [r for r in hub.requests("hub", "/resolve/") if r.method == "GET"]
    assert [r.status for r in gets] == [403]  # no retry loop, no other file tried
    assert files_in(job.folder) == []
    hub.accepted["test/gated"] = {GOOD_TOKEN}
    report = run(job, token)
    assert not report.failures
    assert_verified(job.folder, repo)


def test_gated_repo_without_a_token_L07(hub: HubServer, tmp_path: Path) -> None:
    repo = hub.add(small_repo("test/gated", gated=True))
    job = gated_job(hub, repo, tmp_path / "m")
    with pytest.raises(GatedError, match="no token was given"):
        run(job)
    with pytest.raises(GatedError, match="no token was given"):
        job_for(hub, repo, tmp_path / "other")  # the manifest meets the same gate


def test_invalid_and_out_of_scope_tokens_L07(hub: HubServer, tmp_path: Path) -> None:
    repo = hub.add(small_repo("test/private", private=True))
    good = Token(GOOD_TOKEN, "HF_TOKEN")
    job = job_for(hub, repo, tmp_path / "m", good)
    with pytest.raises(AuthError, match="refused the token from HF_TOKEN as invalid"):
        run(job, Token("hf_revoked", "HF_TOKEN"))
    with pytest.raises(AuthError, match="not readable with the token") as info:
        run(job, Token(SCOPED_TOKEN, "--token-file /x"))
    assert "fine-grained token needs read access" in info.value.hint
    assert SCOPED_TOKEN not in info.value.render()
    assert files_in(job.folder) == []


def test_token_goes_to_the_endpoint_and_never_to_the_cdn_L06(
    hub: HubServer, tmp_path: Path
) -> None:
    repo = hub.add(small_repo("test/private", private=True))
    token = Token(GOOD_TOKEN, "HF_TOKEN")
    job = job_for(hub, repo, tmp_path / "m", token)
    report = run(job, token)
    assert not report.failures
    assert all(r.auth == f"Bearer {GOOD_TOKEN}" for r in hub.requests("hub"))
    assert hub.requests("cdn") and all(r.auth is None for r in hub.requests("cdn"))


def test_an_empty_file_is_created_without_a_request(hub: HubServer, tmp_path: Path) -> None:
    repo = small_repo()
    repo.files["__init__.py"] = RepoFile("__init__.py", Blob([b""]).hashed(), lfs=False)
    hub.add(repo)
    job = job_for(hub, repo, tmp_path / "m")
    report = run(job)
    assert not report.failures
    assert (job.folder / "__init__.py").read_bytes() == b""
    assert not [r for r in hub.requests("hub", "__init__") if r.method == "GET"]
    assert_verified(job.folder, repo)
