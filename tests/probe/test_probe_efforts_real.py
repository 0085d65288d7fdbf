"""L-46 against the real llama-server: a chat template that refuses some effort levels.

The server runs the real 270M model with the incident's template
(tests/fixtures/templates/efforts-xhigh-medium-low.jinja): it reads
``reasoning_effort`` (llama-server passes the request's value into the
template) and raises for anything but ``xhigh|medium|low``. The probe must
list only the accepted values, map every level onto them, and carry the
server's own refusal as evidence.

Mutation killed: counting any HTTP status as accepted in
``checks_features.efforts``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import FIXTURES
from helpers.real_server import running_server
from test_probe_real import session_for

from inferfleet.io import http
from inferfleet.probe import checks_api, checks_features

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TEMPLATE = FIXTURES / "templates" / "efforts-xhigh-medium-low.jinja"


def test_L46_the_real_server_refuses_efforts_its_template_does_not_take(tmp_path: Path) -> None:
    shutil.copy(TEMPLATE, tmp_path / "efforts.jinja")
    client = {"max_tokens": 512, "reasoning_field": "reasoning_content"}
    with (
        running_server(
            tmp_path, chat_template_file="efforts.jinja", jinja=True, client=client
        ) as server,
        http.client(timeout=300.0, base_url=server.url) as session_client,
    ):
        s = session_for(server.fleet, session_client)
        checks_api.read_props(s)
        result = checks_features.efforts(s)
    found = s.findings
    assert found.efforts_accepted == ["low", "medium", "xhigh"], result.summary
    assert found.efforts_refused == {"minimal": 400, "high": 400}  # the template raised
    assert found.effort_map == {
        "minimal": "low", "low": "low", "medium": "medium", "high": "xhigh", "xhigh": "xhigh",
    }  # fmt: skip
    assert "Jinja Exception: reasoning_effort must be one of" in " ".join(
        e.answer for e in result.evidence
    )
    assert result.status == "pass"  # no client map declared: the probed map is the advice
