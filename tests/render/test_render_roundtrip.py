"""Property: any value the schema accepts reaches systemd as exactly that value.

An argv word accepted for ``extra_args`` and an env value accepted for
``env``/``container.env`` are written into a unit (``ExecStart=``,
``Environment=``) by the renderers' quoting, then read back with an unquoter
written from systemd.syntax(7) and systemd.service(5) ("Command lines"):
``%`` specifiers first (``%%`` is ``%``), then words split on whitespace
with single and double quotes and C escapes, and in command lines ``$$`` is
``$``. A sample of the same units goes through the real
``systemd-analyze verify``, which must print nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError
from render_helpers import run, stub_executable

from inferfleet.fleetfile.base import Argument, EnvValue
from inferfleet.render.unitfile import UnitFile, command_line

PROGRAM = "/opt/inferfleet-test/bin/server"
ARGUMENT = TypeAdapter(Argument)
ENV_VALUE = TypeAdapter(EnvValue)
# Everything that means something to systemd's parser, plus ordinary text and controls.
ALPHABET = st.one_of(
    st.sampled_from(list(" \t\"'\\%$;{}=:,.-_/@!#&*?()[]<>|~`^ab9éß€")),
    st.characters(codec="utf-8"),
)
WORDS = st.text(alphabet=ALPHABET, min_size=1, max_size=24)


def _ok(adapter: TypeAdapter[str]) -> object:
    def check(value: str) -> bool:
        try:
            adapter.validate_python(value)
        except ValidationError:
            return False
        return True

    return check


ARG_WORDS = WORDS.filter(_ok(ARGUMENT))  # type: ignore[arg-type]
ENV_WORDS = st.text(
    alphabet=st.sampled_from(list(" %;{}=:,.-_/@!#&*?()[]<>|~^ab9éß€")), min_size=1, max_size=24
).filter(_ok(ENV_VALUE))  # type: ignore[arg-type]

_SIMPLE = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "s": " "}
_SIMPLE |= {"\\": "\\", '"': '"', "'": "'"}


def accepted(adapter: TypeAdapter[str], value: str) -> str:
    try:
        return adapter.validate_python(value)
    except ValidationError:
        assume(False)
        raise AssertionError("unreachable") from None


def _cunescape(text: str, i: int) -> tuple[str, int]:
    """One C escape starting after the backslash at ``text[i - 1]`` (systemd's cunescape_one)."""
    ch = text[i]
    if ch in _SIMPLE:
        return _SIMPLE[ch], i + 1
    if ch == "x":
        return chr(int(text[i + 1 : i + 3], 16)), i + 3
    if ch == "u":
        return chr(int(text[i + 1 : i + 5], 16)), i + 5
    if ch == "U":
        return chr(int(text[i + 1 : i + 9], 16)), i + 9
    if ch in "01234567":
        return chr(int(text[i : i + 3], 8)), i + 3
    raise AssertionError(f"systemd refuses the escape \\{ch} in {text!r}")


def systemd_words(value: str, *, command: bool) -> list[str]:
    """Split a unit value into words as systemd does (specifiers, quotes, C escapes)."""
    assert "\n" not in value and "\r" not in value, "a unit value is one line"
    text = value
    # Specifier expansion runs over the raw value first: a lone % is an error.
    out, i = [], 0
    while i < len(text):
        if text[i] == "%":
            assert text[i + 1 : i + 2] == "%", f"unknown specifier in {value!r}"
            out.append("%")
            i += 2
        else:
            out.append(text[i])
            i += 1
    text = "".join(out)
    words: list[str] = []
    i = 0
    while i < len(text):
        while i < len(text) and text[i] in " \t":
            i += 1
        if i >= len(text):
            break
        word: list[str] = []
        quote = ""
        while i < len(text) and (quote or text[i] not in " \t"):
            ch = text[i]
            if quote and ch == quote:
                quote = ""
                i += 1
                assert i >= len(text) or text[i] in " \t", "a closing quote ends the word"
            elif not quote and ch in "\"'" and not word:
                quote = ch
                i += 1
            elif ch == "\\":
                decoded, i = _cunescape(text, i + 1)
                word.append(decoded)
            else:
                word.append(ch)
                i += 1
        assert not quote, f"unterminated quote in {value!r}"
        joined = "".join(word)
        words.append(joined.replace("$$", "\0").replace("\0", "$") if command else joined)
    return words


@settings(max_examples=200, deadline=None)
@given(st.lists(ARG_WORDS, min_size=1, max_size=4))  # filtered per word, not per list
def test_accepted_argv_words_parse_back_from_exec_start(words: list[str]) -> None:
    argv = [PROGRAM, *(accepted(ARGUMENT, w) for w in words)]
    unit = UnitFile().add("Service", "ExecStart", command_line(argv))
    (line,) = [ln for ln in unit.text().splitlines() if ln.startswith("ExecStart=")]
    assert systemd_words(line.removeprefix("ExecStart="), command=True) == argv


@settings(max_examples=200, deadline=None)
@given(WORDS)
def test_accepted_env_values_parse_back_from_environment(value: str) -> None:
    value = accepted(ENV_VALUE, value)
    unit = UnitFile().add("Container", "Environment", command_line([f"NAME={value}"]))
    (line,) = [ln for ln in unit.text().splitlines() if ln.startswith("Environment=")]
    assert systemd_words(line.removeprefix("Environment="), command=False) == [f"NAME={value}"]


def test_the_unquoter_is_systemds_own_reading() -> None:
    """Fixed points from systemd.syntax(7), so the property above checks something real."""
    assert systemd_words('a "b c" \'d e\' \\x41 \\101 %%h $$x', command=True) == [
        "a", "b c", "d e", "A", "A", "%h", "$x",
    ]  # fmt: skip
    assert systemd_words('"a\\"b\\\\c"', command=False) == ['a"b\\c']


@pytest.fixture(scope="module")
def analyze_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("root")
    (root / "etc/systemd/system").mkdir(parents=True)
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system", symlinks=True)
    stub_executable(root, PROGRAM)
    return root


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(ARG_WORDS, min_size=1, max_size=6), ENV_WORDS)
def test_real_systemd_analyze_accepts_the_rendered_values(
    systemd_analyze: str, analyze_root: Path, words: list[str], env: str
) -> None:
    argv = [PROGRAM, *words]
    unit = UnitFile()
    unit.add("Unit", "Description", "round trip")
    unit.add("Service", "Type", "exec")
    unit.add("Service", "Environment", command_line([f"NAME={env}"]))
    unit.add("Service", "ExecStart", command_line(argv))
    path = analyze_root / "etc/systemd/system/roundtrip.service"
    path.write_text(unit.text(), encoding="utf-8")
    result = run(
        [
            systemd_analyze,
            f"--root={analyze_root}",
            "verify",
            "--man=no",
            "/" + str(path.relative_to(analyze_root)),
        ]
    )
    output = (result.stdout + result.stderr).strip()
    assert result.returncode == 0 and output == "", f"{unit.text()}\n{output}"
