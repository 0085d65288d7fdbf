"""The archive itself: replacement through the backend, prune, and hostile indexes.

Real files in the test's own folders and the real CLI (in process). The
index of an entry is hostile state like a marker (L-41): a damaged one is
reported and never trusted, and a recorded path that is relative, has
``..`` or leads through a symlink is never written to. Copies of env files
hold secrets and stay 0600 in a 0700 archive (L-55).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from inferfleet.backends.systemd import install_file, uninstall_file
from inferfleet.io.archive import Archive, ArchiveError, Keeper

DAY = 86400.0


def keeper(state: Path, service: str = "web", revision: str = "a" * 40) -> Keeper:
    return Keeper(Archive(state), service=service, revision=revision, by_revision="b" * 40)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_replacing_a_unit_archives_the_old_one_and_an_unchanged_one_is_not(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    unit = tmp_path / "etc" / "web.service"
    assert install_file(unit, "v1\n", keeper=keeper(state)) is True
    assert Archive(state).entries() == []  # nothing was there to keep
    assert install_file(unit, "v1\n", keeper=keeper(state)) is False
    assert Archive(state).entries() == []
    unit.chmod(0o640)
    assert install_file(unit, "v2\n", keeper=keeper(state)) is True
    assert unit.read_text() == "v2\n"
    (entry,) = Archive(state).entries()
    assert entry.index is not None and entry.index.reason == "replace"
    assert entry.index.revision == "a" * 40 and entry.index.by_revision == "b" * 40
    (item,) = entry.index.files
    assert (item.path, item.mode, item.size) == (str(unit), 0o640, 3)
    copy = entry.folder / "files" / str(unit).lstrip("/")
    assert copy.read_text() == "v1\n" and mode(copy) == 0o600


def test_uninstall_archives_then_removes_and_never_follows_a_symlink(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = tmp_path / "etc" / "web.env"
    env.parent.mkdir()
    env.write_text("KEY=v\n")
    uninstall_file(env, keeper=keeper(state))
    assert not env.exists()
    (entry,) = Archive(state).entries()
    assert entry.index is not None and entry.index.reason == "retire"
    uninstall_file(env, keeper=keeper(state))  # already gone: nothing more to keep
    assert len(Archive(state).entries()) == 1

    # A symlink holds no data: the link goes (as before), what it points to is untouched.
    target = tmp_path / "elsewhere"
    target.write_text("not ours\n")
    link = tmp_path / "etc" / "link.service"
    link.symlink_to(target)
    uninstall_file(link, keeper=keeper(state))
    assert not link.is_symlink() and target.read_text() == "not ours\n"
    assert len(Archive(state).entries()) == 1


def _entries(state: Path, ages_days: list[float]) -> list[str]:
    archive = Archive(state)
    names = []
    for index, age in enumerate(ages_days):
        path = state.parent / "files" / f"f{index}.conf"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"x" * (100 * (index + 1)))
        entry = archive.put(
            [path], service=f"s{index}", revision="", reason="replace", now=time.time() - age * DAY
        )
        assert entry is not None
        names.append(entry.name)
    return names


def test_prune_removes_only_older_entries_and_reports_what_it_frees(
    cli: Any, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    old1, old2, young = _entries(state, [40, 31, 2])
    base = ["archive", "prune", "--state-dir", str(state)]

    dry = cli(*base, "--older-than", "30d", "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    doc = json.loads(dry.stdout)
    assert doc["dry_run"] is True and doc["entries"] == [old1, old2]
    assert doc["freed_entries"] == 2
    sizes = {e.name: e.bytes for e in Archive(state).entries()}
    assert doc["freed_bytes"] == sizes[old1] + sizes[old2]
    assert sorted(sizes) == sorted([old1, old2, young])  # a dry run deletes nothing

    human = cli(*base, "--older-than", "35d")
    assert human.code == 0, human.stderr
    assert f"deleted {old1}" in human.stdout and "freed 1 entry" in human.stdout
    assert [e.name for e in Archive(state).entries()] == [old2, young]

    done = json.loads(cli(*base, "--older-than", "1d12h", "--json").stdout)
    assert done["entries"] == [old2, young] and done["dry_run"] is False
    assert Archive(state).entries() == []
    assert (state / "archive").is_dir()  # the archive itself stays


@pytest.mark.parametrize("bad", ["3x", "", "-1d", "30", "1d 2 weeks", "99999999d"])
def test_a_malformed_duration_is_refused_and_nothing_is_pruned(
    cli: Any, tmp_path: Path, bad: str
) -> None:
    state = tmp_path / "state"
    names = _entries(state, [400])
    result = cli("archive", "prune", "--state-dir", str(state), "--older-than", bad)
    assert result.code == 2, result.stdout
    assert "--older-than" in result.stderr and "90d" in result.stderr
    assert "Traceback" not in result.stderr
    if bad == "30":  # days? minutes? a unit is required
        assert "ambiguous" in result.stderr
    assert [e.name for e in Archive(state).entries()] == names


def _retired(tmp_path: Path) -> tuple[Path, Path, str]:
    state = tmp_path / "state"
    target = tmp_path / "etc" / "web.env"
    target.parent.mkdir(parents=True)
    target.write_text("KEY=v\n")
    target.chmod(0o600)
    keeper(state).remove(target)
    (entry,) = Archive(state).entries()
    return state, target, entry.name


def _rewrite_index(state: Path, name: str, change: dict[str, Any]) -> Path:
    index = state / "archive" / name / "index.json"
    doc = json.loads(index.read_text())
    doc["files"][0].update(change)
    os.chmod(index, 0o600)
    index.write_text(json.dumps(doc))
    return index


def test_a_damaged_index_is_listed_with_its_problem_and_never_restored(
    cli: Any, tmp_path: Path
) -> None:
    state, target, name = _retired(tmp_path)
    (state / "archive" / name / "index.json").write_text('{"service": "web", "files": [')
    listed = json.loads(cli("archive", "list", "--state-dir", str(state), "--json").stdout)
    (row,) = listed["entries"]
    assert row["service"] is None and "not valid JSON" in row["problem"]
    result = cli("archive", "restore", name, "--state-dir", str(state))
    assert result.code == 1
    assert "archive index" in result.stderr and "damaged" in result.stderr
    assert "nothing was restored" in result.stderr and "Traceback" not in result.stderr
    assert not target.exists()


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("etc/web.env", "not an absolute path"),
        ("/tmp/../etc/passwd", "has a '..' part"),
        ("/tmp/x\nExecStart=/bin/sh", "control character"),
    ],
)
def test_an_index_path_that_escapes_is_refused(
    cli: Any, tmp_path: Path, path: str, why: str
) -> None:
    state, target, name = _retired(tmp_path)
    _rewrite_index(state, name, {"path": path})
    result = cli("archive", "restore", name, "--state-dir", str(state))
    assert result.code == 1 and why in result.stderr, result.stderr
    assert "nothing was restored" in result.stderr
    assert not target.exists() and not Path("/etc/web.env").exists()


def test_restore_through_a_symlink_is_refused(cli: Any, tmp_path: Path) -> None:
    state, target, name = _retired(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # The folder the file lived in is now a link to another place: refused.
    target.parent.rename(tmp_path / "etc-moved")
    target.parent.symlink_to(elsewhere)
    result = cli("archive", "restore", name, "--state-dir", str(state), "--force")
    assert result.code == 1 and "lies under a symlink" in result.stderr, result.stderr
    assert list(elsewhere.iterdir()) == []

    # The file itself is a link: refused even with --force.
    target.parent.unlink()
    target.parent.mkdir()
    target.symlink_to(elsewhere / "victim")
    result = cli("archive", "restore", name, "--state-dir", str(state), "--force")
    assert result.code == 1 and "is a symlink" in result.stderr
    assert list(elsewhere.iterdir()) == [] and target.is_symlink()


def test_a_stored_copy_that_is_a_symlink_or_altered_is_refused(cli: Any, tmp_path: Path) -> None:
    state, target, name = _retired(tmp_path)
    copy = state / "archive" / name / "files" / str(target).lstrip("/")
    copy.write_text("KEY=tampered\n")
    result = cli("archive", "restore", name, "--state-dir", str(state))
    assert result.code == 1 and "does not match its index" in result.stderr
    secret = tmp_path / "secret"
    secret.write_text("KEY=v\n")
    copy.unlink()
    copy.symlink_to(secret)
    result = cli("archive", "restore", name, "--state-dir", str(state))
    assert result.code == 1 and "not a regular file inside the entry" in result.stderr
    assert not target.exists()


def test_restore_names_only_entries(cli: Any, tmp_path: Path) -> None:
    state, _target, _name = _retired(tmp_path)
    for bad in ["../state", "nope", "20261203T091316.417696Z-web/../x"]:
        result = cli("archive", "restore", bad, "--state-dir", str(state))
        assert result.code == 2 and "archive list" in result.stderr, bad


@pytest.mark.parametrize("bad", ["units/web.service", "/etc/../tmp/web.service"])
def test_a_path_that_is_not_absolute_and_plain_is_never_removed_or_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    """A damaged marker's ``installed`` list is state like any other (L-41)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "units").mkdir()
    (tmp_path / "units" / "web.service").write_text("[Unit]\n")
    with pytest.raises(ArchiveError, match="refusing to archive"):
        uninstall_file(Path(bad), keeper=keeper(tmp_path / "state"))
    with pytest.raises(ArchiveError, match="refusing to archive"):
        install_file(Path(bad), "x", keeper=keeper(tmp_path / "state"))
    assert (tmp_path / "units" / "web.service").read_text() == "[Unit]\n"


def test_render_settings_archives_the_file_it_replaces(
    cli: Any, tmp_path: Path, _isolated_state: Path
) -> None:
    """``render-settings`` by hand replaces like a deploy does: the old secrets are kept (L-54)."""
    from helpers import ROOT

    env = tmp_path / "search.env"
    env.write_text("SEARXNG_SECRET=first-secret\n")
    dest_root = tmp_path / "host"
    args = ("render-settings", "search", "--file", str(ROOT / "examples/homelab/fleet.yaml"),
            "--env-file", str(env), "--dest-root", str(dest_root))  # fmt: skip
    assert cli(*args).code == 0
    (written,) = list(dest_root.rglob("settings.yml"))
    old = written.read_bytes()
    env.write_text("SEARXNG_SECRET=second-secret\n")
    result = cli(*args)
    assert result.code == 0, result.stderr
    assert b"second-secret" in written.read_bytes()
    (entry,) = Archive(_isolated_state).entries()
    assert entry.index is not None and entry.index.service == "search"
    assert entry.index.reason == "replace" and entry.index.files[0].path == str(written)
    copy = entry.folder / "files" / str(written).lstrip("/")
    assert copy.read_bytes() == old and mode(copy) == 0o600


def test_matching_takes_the_newest_retired_copy_with_the_exact_bytes(tmp_path: Path) -> None:
    """What a rollback restores from: entries retired for this service, same sha256 and size."""
    state = tmp_path / "state"
    unit, env = tmp_path / "etc" / "web.service", tmp_path / "etc" / "web.env"
    unit.parent.mkdir()
    archive = Archive(state)

    def retire(service: str, text: str, at: float, reason: str = "retire") -> str:
        for path in (unit, env):
            path.write_text(f"{text} {path.name}\n")
        entry = archive.put([unit, env], service=service, revision="r" * 40, reason=reason, now=at)
        assert entry is not None
        return entry.name

    older = retire("web", "v1", 1000.0)
    newer = retire("web", "v1", 2000.0)
    retire("web", "v1", 3000.0, reason="replace")  # not a retirement
    retire("other", "v1", 4000.0)  # not this service
    retire("web", "v2", 5000.0)  # other bytes

    def want(text: str, path: Path) -> tuple[str, int]:
        data = f"{text} {path.name}\n".encode()
        return hashlib.sha256(data).hexdigest(), len(data)

    found = archive.matching("web", {str(unit): want("v1", unit), str(env): want("v3", env)})
    assert {p: (e.name, f.path) for p, (e, f) in found.items()} == {str(unit): (newer, str(unit))}
    assert archive.matching("web", {}) == {}
    assert older != newer

    # Restoring records itself in the entry's index, once per apply, and the copy must hold.
    unit.unlink()
    k = keeper(state)
    entry, item = found[str(unit)]
    assert k.restore(entry, item) is True and unit.read_text() == "v1 web.service\n"
    k.restored([(entry.name, str(unit))])
    (done,) = archive.index(entry.name).restores
    assert (done.by, done.paths, done.by_revision) == ("apply", [str(unit)], "b" * 40)
    copy_ = entry.folder / "files" / str(unit).lstrip("/")
    copy_.write_text("v9 web.service\n")  # same size, other bytes
    with pytest.raises(ArchiveError, match="does not match its index"):
        k.restore(entry, item)


def test_an_index_whose_restores_name_a_file_it_lacks_is_damaged(tmp_path: Path) -> None:
    state = tmp_path / "state"
    unit = tmp_path / "web.service"
    unit.write_text("v1\n")
    entry = Archive(state).put([unit], service="web", revision="", reason="retire")
    assert entry is not None
    index = entry.folder / "index.json"
    data = json.loads(index.read_text())
    data["restores"] = [{"when": "x", "at": 0.0, "paths": ["/etc/shadow"], "by": "apply"}]
    index.write_text(json.dumps(data))
    (listed,) = Archive(state).entries()
    assert listed.index is None and listed.problem is not None
    assert "restores: one names a restorer or a file the entry does not have" in listed.problem
    assert Archive(state).matching("web", {str(unit): ("0" * 64, 3)}) == {}
