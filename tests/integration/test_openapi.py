"""The HTTP API as its OpenAPI document describes it, against a live ``pochta serve``."""

from __future__ import annotations

import re
import smtplib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import TOKEN, Server, eventually, start_server
from tests.mailtools import letter

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("openapi")
    srv = start_server(
        tmp / "data",
        tmp / "serve.log",
        settings={
            "POCHTA_ANTISPAM__POOL_PROCESSES": "0",
            "POCHTA_VALKYRIE__ENABLED": "false",
            # every test logs in from 127.0.0.1, schemathesis with random passwords too
            "POCHTA_GUARD__LOGIN_IP_MAX": "100000",
            "POCHTA_GUARD__LOGIN_CLIENT_MAX": "100000",
            "POCHTA_GUARD__LOGIN_ACCOUNT_FREE": "100000",
            "POCHTA_GUARD__LOGIN_ACCOUNT_CHECKS": "300000",
        },
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


ST = (sys.executable, "-m", "schemathesis.cli")  # ``st`` of this environment
CONFIG = Path(__file__).with_name("schemathesis.toml")
PASSWORD = "a long enough password"
CHECKS = "all"
EXAMPLES = 25
SEED = 21


def schemathesis(server: Server, token: str, workdir: Path, *select: str) -> None:
    """One ``st run`` against the live server with ``token``; it must find nothing."""
    done = subprocess.run(
        [
            *(*ST, "--config-file", str(CONFIG), "run", f"{server.url}/openapi.json"),
            *("--checks", CHECKS, "--max-examples", str(EXAMPLES), "--seed", str(SEED)),
            *("--phases", "examples,coverage,fuzzing", "--workers", "1"),
            *("--generation-database", "none", "--no-color", "--request-timeout", "10"),
            *("--header", f"Authorization: Bearer {token}", *select),
        ],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-5000:]


def test_the_api_does_what_its_openapi_document_says(server: Server, tmp_path: Path) -> None:
    """schemathesis (``st run``) against the live server, with both kinds of token:

    - checks: all of them (``--checks all``): not_a_server_error, status_code_conformance,
      content_type_conformance, response_headers_conformance, response_schema_conformance,
      negative_data_rejection, positive_data_acceptance, missing_required_header,
      unsupported_method, allow_header_conformance, use_after_free,
      ensure_resource_availability, ignored_auth (the last three need links between
      operations and have none to follow here);
    - phases examples, coverage (boundaries and each way to break the schema) and fuzzing,
      at most 25 generated cases per operation in fuzzing, seed 21, one worker: about 900
      cases in all (440 with the service token, 440 with the session token, a few for
      DELETE /v1/session), 20 s on a 2-core machine;
    - the service token for the blob, scan, shingle and health endpoints; a user's session
      token for the mailbox (``POST /v1/session`` and everything under it), then
      ``DELETE /v1/session`` alone, last, since it ends that session;
    - tests/integration/schemathesis.toml: the one documented exception, PUT of a blob whose
      schema-valid body does not hash to the key (422 content_mismatch).
    """
    session = add_user(server, "alice@example.org")["Authorization"].removeprefix("Bearer ")
    service = ["--include-tag", "blobs", "--include-tag", "antispam"]
    service += ["--include-tag", "shingles", "--include-tag", "service"]
    schemathesis(server, TOKEN, tmp_path, *service)
    mailbox = ["--include-tag", "mailbox", "--exclude-name", "DELETE /v1/session"]
    schemathesis(server, session, tmp_path, *mailbox)
    schemathesis(server, session, tmp_path, "--include-name", "DELETE /v1/session")


def add_user(server: Server, email: str) -> dict[str, str]:
    subprocess.run(
        [
            *(sys.executable, "-m", "pochta", "user", "add", email),
            *("--password-stdin", "--data", str(server.data)),
        ],
        input=f"{PASSWORD}\n".encode(),
        check=True,
        capture_output=True,
    )
    r = httpx.post(f"{server.url}/v1/session", json={"email": email, "password": PASSWORD})
    return {"Authorization": f"Bearer {r.json()['token']}"}


def test_an_empty_patch_changes_nothing_and_odd_input_is_a_4xx(server: Server) -> None:
    """``{}`` is schema-valid for PATCH /v1/messages/{id}: answered (200, nothing changed),
    not refused (it was a 400). Values the schema does not allow are 422, never a 500."""
    auth = add_user(server, "bob@example.org")
    with smtplib.SMTP("127.0.0.1", server.smtp_port, timeout=30) as smtp:
        smtp.sendmail("a@example.net", ["bob@example.org"], letter(subject="hello"))
    (m,) = eventually(  # queued: stored a moment after its 250
        lambda: httpx.get(f"{server.url}/v1/messages", headers=auth).json()["messages"], bool
    )
    r = httpx.patch(f"{server.url}/v1/messages/{m['id']}", json={}, headers=auth)
    assert r.status_code == 200, r.text
    assert {k: r.json()[k] for k in ("seen", "flagged", "folder")} == {
        k: m[k] for k in ("seen", "flagged", "folder")
    }
    for body in ({"seen": 1}, {"seen": "yes"}, {"colour": "red"}):
        r = httpx.patch(f"{server.url}/v1/messages/{m['id']}", json=body, headers=auth)
        assert r.status_code == 422, (body, r.text)
    r = httpx.patch(f"{server.url}/v1/messages/{10**30}", json={}, headers=auth)
    assert r.status_code == 422, r.text
    r = httpx.get(f"{server.url}/v1/messages", params={"cursor": "9" * 19}, headers=auth)
    assert r.status_code == 422, r.text
    r = httpx.request("OPTIONS", f"{server.url}/v1/blobs/{'ab' * 32}", headers=auth)
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD, PUT"
