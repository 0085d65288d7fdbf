"""Pure parts: token sources and modes (L-06), status mapping (L-07), X-Linked-* (L-02)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from inferfleet.errors import AuthError, GatedError, HTTPError, RemoteNotFoundError, TransientError
from inferfleet.hub import wire
from inferfleet.hub.auth import Token, auth_headers, read_token_file, resolve_token

SHA = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
ENDPOINT = "http://127.0.0.1:8000"


def _token_file(tmp_path: Path, mode: int, text: str = "hf_secret123") -> Path:
    path = tmp_path / "token"
    path.write_text(text + "\n")
    os.chmod(path, mode)
    return path


def test_token_file_readable_by_others_is_refused_L06(tmp_path: Path) -> None:
    path = _token_file(tmp_path, 0o644)
    with pytest.raises(AuthError) as info:
        read_token_file(path, source="test")
    assert "mode 0644" in info.value.message
    assert f"chmod 600 {path}" in info.value.hint
    assert "hf_secret123" not in info.value.render()


def test_token_file_mode_600_is_read(tmp_path: Path) -> None:
    token = read_token_file(_token_file(tmp_path, 0o600), source="test")
    assert token.value == "hf_secret123"
    assert "hf_secret123" not in repr(token) and "hf_secret123" not in str(token)


@pytest.mark.parametrize("text", ["", "two tokens"])
def test_token_file_without_one_token_is_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(AuthError, match="does not hold one token"):
        read_token_file(_token_file(tmp_path, 0o600, text), source="test")


def test_token_sources_in_order(tmp_path: Path) -> None:
    stored = _token_file(tmp_path, 0o600, "hf_stored")
    explicit = tmp_path / "explicit"
    explicit.write_text("hf_explicit")
    explicit.chmod(0o600)
    env = {"HF_TOKEN": "hf_env", "HF_TOKEN_PATH": str(stored)}
    chosen = resolve_token(token_file=explicit, environ=env)
    assert chosen is not None and (chosen.value, chosen.source) == (
        "hf_explicit",
        f"--token-file {explicit}",
    )
    chosen = resolve_token(environ=env)
    assert chosen is not None and (chosen.value, chosen.source) == ("hf_env", "HF_TOKEN")
    chosen = resolve_token(environ={"HF_TOKEN_PATH": str(stored)})
    assert chosen is not None and chosen.value == "hf_stored"
    assert "huggingface_hub login" in chosen.source
    assert resolve_token(environ={"HF_TOKEN_PATH": str(tmp_path / "absent")}) is None


def test_stored_login_with_loose_mode_is_refused_L06(tmp_path: Path) -> None:
    stored = _token_file(tmp_path, 0o640, "hf_stored")
    with pytest.raises(AuthError, match="can be read by other users"):
        resolve_token(environ={"HF_TOKEN_PATH": str(stored)})


def test_token_goes_to_the_endpoint_origin_only_L06() -> None:
    token = Token("hf_x", "test")
    assert auth_headers(f"{ENDPOINT}/a/resolve/main/f", endpoint=ENDPOINT, token=token) == {
        "Authorization": "Bearer hf_x"
    }
    for other in (
        "http://127.0.0.2:8000/xet/abc",  # the CDN
        "http://127.0.0.1:8001/a",  # another port
        "https://127.0.0.1:8000/a",  # another scheme
    ):
        assert auth_headers(other, endpoint=ENDPOINT, token=token) == {}
    assert auth_headers(f"{ENDPOINT}/a", endpoint=ENDPOINT, token=None) == {}


def _response(status: int, headers: dict[str, str], body: bytes = b"") -> httpx.Response:
    request = httpx.Request("GET", f"{ENDPOINT}/org/repo/resolve/main/model.gguf")
    return httpx.Response(status, headers=headers, content=body, request=request)


def test_linked_headers_are_read_from_the_first_answer_L02() -> None:
    info = wire.linked(
        _response(
            302,
            {"X-Linked-Size": "253113024", "X-Linked-Etag": f'"{SHA}"', "X-Repo-Commit": "c" * 40},
        )
    )
    assert (info.size, info.sha256, info.commit) == (253113024, SHA, "c" * 40)
    # A CAS hash or a git sha in the ETag is not a sha256 and is not taken for one.
    weak = wire.linked(_response(302, {"X-Linked-Etag": 'W/"' + "b" * 40 + '"'}))
    assert weak.size is None and weak.sha256 is None
    assert wire.normalize_etag('W/"ABC"') == "abc"


def _error(status: int, headers: dict[str, str], token: Token | None = None) -> Exception:
    return wire.hub_error(
        status,
        httpx.Headers(headers),
        "body",
        where="url",
        repo="org/repo",
        path="model.gguf",
        token=token,
        endpoint=ENDPOINT,
    )


def test_gated_answers_say_accept_the_gate_L07() -> None:
    token = Token("hf_x", "HF_TOKEN")
    error = _error(403, {"X-Error-Code": "GatedRepo", "X-Error-Message": "not in list"}, token)
    assert isinstance(error, GatedError)
    assert "has not been granted access" in error.message and "HF_TOKEN" in error.message
    assert f"{ENDPOINT}/org/repo" in error.hint and "accept the terms" in error.hint
    assert "Not retried" in error.hint
    anonymous = _error(401, {"X-Error-Code": "GatedRepo"})
    assert isinstance(anonymous, GatedError) and "no token was given" in anonymous.message


def test_401_and_403_name_the_token_problem_L07() -> None:
    token = Token("hf_x", "HF_TOKEN")
    invalid = _error(401, {"X-Error-Message": "Invalid credentials in Authorization header"}, token)
    assert isinstance(invalid, AuthError) and "refused the token" in invalid.message
    assert "new read token" in invalid.hint
    private = _error(401, {"X-Error-Code": "RepoNotFound"})
    assert isinstance(private, AuthError) and "private" in private.message
    scope = _error(403, {"X-Error-Message": "no access"}, token)
    assert isinstance(scope, AuthError) and "scope" in scope.hint
    for error in (invalid, private, scope):
        assert "hf_x" not in error.render()


def test_transient_and_other_statuses() -> None:
    burst = _error(503, {"Retry-After": "7"})
    assert isinstance(burst, TransientError) and burst.retry_after == 7.0
    assert isinstance(_error(429, {}), TransientError)
    gone = _error(404, {"X-Error-Code": "EntryNotFound"})
    assert isinstance(gone, RemoteNotFoundError) and "model.gguf is not in the repo" in gone.message
    other = _error(418, {})
    assert type(other) is HTTPError and "unexpected HTTP 418" in other.message
