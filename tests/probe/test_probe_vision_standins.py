"""L-44: the vision probe against stand-in endpoints, offline, through ``inferfleet probe``.

Only the OpenAI ``image_url`` content part reaches a vision model; a 200 proves
nothing. Each stand-in is a small ASGI app on a loopback port that really
reads the PNG it is given (when it reads one at all) and names its colour:

- ``wrong-colour``: answers 200 to every image with a colour that is not the
  image's: the probe must FAIL vision;
- ``images-field``: Ollama-style, it sees an image only in a top-level
  ``images`` field (base64 PNGs) and ignores ``image_url`` parts, inventing an
  answer; ``images-field-strict`` refuses ``image_url`` parts with 400. Neither
  may pass as OpenAI-compatible vision, although both name the colour right
  when sent the legacy field;
- ``openai``: reads the ``image_url`` data URL, the control that passes.
"""

from __future__ import annotations

import base64
import contextlib
import json
import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.asgi_server import serving
from helpers.real_server import fleet_data, write_fleet
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from inferfleet.probe.checks_features import VISION_COLOUR
from inferfleet.probe.images import COLOURS, solid_png

ALIAS = "gemma3-270m"  # the embedded example's alias, which the probe asks for
WRONG = "blue"
INVENTED = "The picture shows a green meadow under a clear sky."


def png_colour(png: bytes) -> str | None:
    """The colour name of a solid 8-bit RGB PNG's first pixel, None when not one of COLOURS."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    pos, header, idat = 8, b"", b""
    while pos + 8 <= len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        header = data if kind == b"IHDR" else header
        idat += data if kind == b"IDAT" else b""
        pos += 12 + length
    if len(header) != 13 or header[8:10] != b"\x08\x02":  # 8-bit truecolour only
        return None
    first = tuple(zlib.decompress(idat)[1:4])
    return next((name for name, rgb in COLOURS.items() if rgb == first), None)


def data_url_colour(url: object) -> str | None:
    prefix = "data:image/png;base64,"
    if not isinstance(url, str) or not url.startswith(prefix):
        return None
    return png_colour(base64.b64decode(url[len(prefix) :]))


def image_url_parts(body: dict[str, Any]) -> list[Any]:
    parts = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            parts += [
                p.get("image_url", {}).get("url")
                for p in content
                if isinstance(p, dict) and p.get("type") == "image_url"
            ]
    return parts


def reply(content: str) -> JSONResponse:
    return JSONResponse(
        {
            "object": "chat.completion",
            "model": ALIAS,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],  # fmt: skip
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
        }
    )


def vision_app(mode: str, seen: list[dict[str, Any]]) -> Starlette:
    """A chat endpoint with the vision behaviour ``mode``; every chat body lands in ``seen``."""

    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def models(_: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": ALIAS, "object": "model"}]})

    async def chat(request: Request) -> Response:
        body = json.loads(await request.body())
        seen.append(body)
        urls = image_url_parts(body)
        legacy = body.get("images")
        if mode.startswith("images-field"):
            if isinstance(legacy, list) and legacy:
                return reply(png_colour(base64.b64decode(legacy[0])) or "unknown")
            if urls and mode == "images-field-strict":
                return JSONResponse(
                    {"error": {"message": "content must be a string", "code": 400}}, 400
                )
            return reply(INVENTED if urls else "Hello.")
        if not urls:
            return reply("Hello.")
        if mode == "wrong-colour":
            return reply(WRONG)
        return reply(data_url_colour(urls[0]) or "unknown")  # openai: reads the image

    async def missing(_: Request) -> Response:
        return JSONResponse({"error": {"message": "not found", "code": 404}}, 404)

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/models", models),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/{path:path}", missing, methods=["GET", "POST"]),
        ]
    )


@pytest.fixture
def standin() -> Iterator[Callable[[str], tuple[str, list[dict[str, Any]]]]]:
    """Start a stand-in of a mode: (its base URL, the chat bodies it received)."""
    with contextlib.ExitStack() as stack:

        def start(mode: str) -> tuple[str, list[dict[str, Any]]]:
            seen: list[dict[str, Any]] = []
            return stack.enter_context(serving(vision_app(mode, seen))), seen

        yield start


def probe_vision(cli: Any, url: str, tmp_path: Path) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """``inferfleet probe`` of a fleet service that declares image input, served at ``url``."""
    port = int(url.rsplit(":", 1)[1])
    client = {"chat": True, "input": ["text", "image"], "max_tokens": 512}
    fleet = write_fleet(tmp_path / "fleet.yaml", fleet_data(port, client=client))
    result = cli("probe", "gemma", "--file", str(fleet), "--json")
    doc = json.loads(result.stdout)
    (vision,) = [c for c in doc["checks"] if c["id"] == "vision"]
    return result.code, vision, doc


def the_probe_sent_an_image_url_part(seen: list[dict[str, Any]]) -> dict[str, Any]:
    """The probe's vision request: the red PNG as an image_url part, no legacy field."""
    asked = [body for body in seen if image_url_parts(body)]
    assert len(asked) == 1, seen
    (body,) = asked
    assert [data_url_colour(u) for u in image_url_parts(body)] == [VISION_COLOUR]
    assert "images" not in body
    return body


def test_L44_a_200_with_the_wrong_colour_fails_vision(
    cli: Any, standin: Any, tmp_path: Path
) -> None:
    url, seen = standin("wrong-colour")
    code, vision, doc = probe_vision(cli, url, tmp_path)
    assert vision["status"] == "fail", vision
    assert vision["lesson"] == "L-44"
    assert f"a solid {VISION_COLOUR} image, answered '{WRONG}'" in vision["summary"]
    assert "--mmproj" in vision["hint"]
    assert doc["findings"]["vision_ok"] is False and doc["ok"] is False and code == 1
    the_probe_sent_an_image_url_part(seen)


@pytest.mark.parametrize("mode", ["images-field", "images-field-strict"])
def test_L44_an_endpoint_that_only_reads_top_level_images_does_not_pass(
    cli: Any, standin: Any, tmp_path: Path, mode: str
) -> None:
    url, seen = standin(mode)
    # The stand-in really sees images sent the legacy way: it names the colour right.
    png = base64.b64encode(solid_png(COLOURS[VISION_COLOUR])).decode("ascii")
    legacy = httpx.post(
        f"{url}/v1/chat/completions",
        json={
            "model": ALIAS,
            "messages": [{"role": "user", "content": "Colour?"}],
            "images": [png],
        },  # fmt: skip
    )
    assert legacy.json()["choices"][0]["message"]["content"] == VISION_COLOUR
    seen.clear()

    code, vision, doc = probe_vision(cli, url, tmp_path)
    assert vision["status"] == "fail", vision
    if mode == "images-field":
        assert "green meadow" in vision["summary"]  # the invented answer is the evidence
    else:
        assert vision["summary"] == "HTTP 400"
    assert doc["findings"]["vision_ok"] is False and code == 1
    the_probe_sent_an_image_url_part(seen)


def test_L44_control_an_openai_compatible_vision_endpoint_passes(
    cli: Any, standin: Any, tmp_path: Path
) -> None:
    url, seen = standin("openai")
    _, vision, doc = probe_vision(cli, url, tmp_path)
    assert vision["status"] == "pass", vision
    assert vision["summary"] == f"named the colour: {VISION_COLOUR!r}"
    assert doc["findings"]["vision_ok"] is True
    the_probe_sent_an_image_url_part(seen)
