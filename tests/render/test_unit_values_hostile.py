"""Property: no value of any key reaches systemd as something else (L-06).

Two ways a unit value is read differently from what was written, besides the
control characters the schema refuses: a value ending in a backslash joins
the next line (a ``secrets_env`` ending in ``\\`` swallowed Quadlet's
``User=``), and a single ``%`` is expanded as a specifier (``%h``, ``%u``) in
nearly every key. :class:`UnitFile` refuses both for every key; the
renderers escape what may legitimately hold a ``%`` (paths, ``HealthCmd``,
``User``). Every key the renderers write is covered, and real
``systemd-analyze verify`` reads a sample back.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from render_helpers import load, render, run
from test_render_roundtrip import systemd_words

from inferfleet.fleetfile.loader import LoadedFleet
from inferfleet.render.bundle import render_fleet
from inferfleet.render.unitfile import UnitFile, UnitFileError, escape_value

# Every (section, key) the renderers write, read from the units of the example fleets.
KEYS = sorted(
    {
        (section, line.partition("=")[0])
        for fleet in ("homelab", "runtimes")
        for artifact in render(fleet)
        if artifact.kind in ("systemd", "quadlet")
        for section, line in (
            (s.split("]")[0], ln)
            for s in artifact.content.split("\n[")[1:]
            for ln in s.split("\n")[1:]
        )
        if "=" in line
    }
)
VALUES = st.text(alphabet=st.sampled_from(list("ab9 /.-_%\\\"'$:=;{}éß")), min_size=0, max_size=16)


def test_the_keys_cover_every_kind_of_value() -> None:
    keys = {key for _section, key in KEYS}
    for key in ("ExecStart", "Environment", "EnvironmentFile", "User", "HealthCmd", "Exec"):
        assert key in keys, key


def _reads_back(line: str) -> str:
    """What systemd makes of one rendered line's value after specifier expansion."""
    key, _, value = line.partition("=")
    assert not value.endswith("\\"), f"{key}= would join the next line: {value!r}"
    out, i = [], 0
    while i < len(value):
        assert value[i] != "%" or value[i + 1 : i + 2] == "%", f"{key}= has a specifier"
        out.append(value[i])
        i += 2 if value[i] == "%" else 1
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(KEYS), VALUES)
def test_every_key_refuses_or_keeps_the_value(key: tuple[str, str], value: str) -> None:
    section, name = key
    # Written as it comes: refused unless systemd would read it back unchanged.
    try:
        unit = UnitFile(comment="").add(section, name, value)
    except UnitFileError:
        assert value.endswith("\\") or "%" in value.replace("%%", "")
    else:
        (line,) = [ln for ln in unit.text().splitlines() if ln.startswith(f"{name}=")]
        _reads_back(line)
    # Escaped by the renderer's helper: read back as exactly the value, or refused.
    try:
        unit = UnitFile(comment="").add(section, name, escape_value(value))
    except UnitFileError:
        assert value.endswith("\\")
    else:
        (line,) = [ln for ln in unit.text().splitlines() if ln.startswith(f"{name}=")]
        assert _reads_back(line) == value


def _with(service: str, **changes: object) -> LoadedFleet:
    loaded = load("runtimes")
    fleet = loaded.fleet
    current = fleet.services[service]
    updated = current.model_copy(update=changes)
    services = {**fleet.services, service: updated}
    return LoadedFleet(fleet.model_copy(update={"services": services}), loaded.path, loaded.source)


@pytest.mark.parametrize("service", ["big", "sg"])  # a systemd unit, a Quadlet .container
def test_a_secrets_env_ending_in_a_backslash_is_refused_and_nothing_rendered(
    service: str, tmp_path: Path
) -> None:
    with pytest.raises(UnitFileError, match="backslash"):
        render_fleet(_with(service, secrets_env="/etc/inferfleet/secrets/x.env\\"))


def test_health_cmd_and_paths_with_percent_reach_the_container_literally() -> None:
    loaded = _with("sg", secrets_env="/etc/inferfleet/100%h.env")
    sg = loaded.fleet.services["sg"]
    container = sg.container.model_copy(update={"health_cmd": "curl -w %{http_code} -f x"})
    fleet = loaded.fleet.model_copy(
        update={
            "services": {
                **loaded.fleet.services,
                "sg": sg.model_copy(update={"container": container}),
            }
        }
    )
    (unit,) = [
        a
        for a in render_fleet(LoadedFleet(fleet, loaded.path, loaded.source))
        if a.path.endswith("sg.container")
    ]
    lines = unit.content.splitlines()
    assert "HealthCmd=curl -w %%{http_code} -f x" in lines
    assert "EnvironmentFile=/etc/inferfleet/100%%h.env" in lines
    for line in lines:
        if "=" in line and not line.startswith("#"):
            _reads_back(line)


def test_systemd_analyze_reads_an_escaped_percent_path_back_without_a_word(
    systemd_analyze: str, verify_root: Callable[[list[str]], Path]
) -> None:
    loaded = _with("big", secrets_env="/etc/inferfleet/secrets/100%h.env")
    (unit,) = [a for a in render_fleet(loaded, "big") if a.path.endswith(".service")]
    assert "EnvironmentFile=/etc/inferfleet/secrets/100%%h.env" in unit.content
    argv = next(
        systemd_words(ln.removeprefix("ExecStart="), command=True)
        for ln in unit.content.splitlines()
        if ln.startswith("ExecStart=")
    )
    root = verify_root([argv[0]])
    name = Path(unit.path).name
    (root / "etc/systemd/system" / name).write_text(unit.content)
    result = run(
        [systemd_analyze, f"--root={root}", "verify", "--man=no", f"/etc/systemd/system/{name}"]
    )
    assert result.returncode == 0 and (result.stdout + result.stderr).strip() == ""
    # A trailing backslash (what UnitFile refuses) swallows the next line: verify sees it.
    (root / "etc/systemd/system" / name).write_text(unit.content.replace("100%%h.env", "x\\"))
    result = run(
        [systemd_analyze, f"--root={root}", "verify", "--man=no", f"/etc/systemd/system/{name}"]
    )
    assert (result.stdout + result.stderr).strip() != ""
