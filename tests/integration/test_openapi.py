"""The HTTP API as its OpenAPI document describes it, against a live ``pochta serve``."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.integration.conftest import Server, start_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("openapi")
    srv = start_server(
        tmp / "data",
        tmp / "serve.log",
        settings={"POCHTA_ANTISPAM__WORKERS": "0", "POCHTA_VALKYRIE__ENABLED": "false"},
    )
    yield srv
    srv.stop()


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_everything_from_the_server_itself(server: Server, page: str) -> None:
    """An offline host gets working docs: no script, style or icon from a CDN."""
    html = httpx.get(server.url + page).text
    refs = re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html)
    assert refs
    assert [r for r in refs if re.match(r"(https?:)?//", r)] == []
    assert "cdn" not in html.lower()
    for ref in refs:
        r = httpx.get(server.url + ref)
        assert r.status_code == 200 and len(r.content) > 1000, ref
