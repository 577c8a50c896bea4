"""A reverse proxy in front of the HTTP API: X-Forwarded-Proto and X-Forwarded-For are believed
from ``http.trusted_proxies`` only (default: this host), so that webmail cookies are Secure
behind a TLS-terminating proxy and no stranger can claim https or another address; and no
password is taken in clear off ``connections.cleartext_login_networks``."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.integration.conftest import Server, start_server
from tests.integration.test_smtp import PASSWORD, add_users

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("proxies")
    add_users(tmp / "data", "alice@example.org")
    settings = {
        "POCHTA_HTTP__TRUSTED_PROXIES": '["127.0.0.1", "127.0.0.3/32"]',
        "POCHTA_CONNECTIONS__CLEARTEXT_LOGIN_NETWORKS": '["127.0.0.1/32"]',
    }
    server = start_server(tmp / "data", tmp / "serve.log", settings=settings)
    yield server
    server.stop()


def login_cookie(srv: Server, source: str, headers: dict[str, str]) -> str:
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=10) as client:
        r = client.get(f"{srv.url}/webmail/login", headers=headers)
    assert r.status_code == 200
    (cookie,) = [v for k, v in r.headers.multi_items() if k == "set-cookie"]
    return cookie.lower()


def test_secure_cookies_behind_a_trusted_tls_proxy(srv: Server) -> None:
    https = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.7"}
    assert "; secure" in login_cookie(srv, "127.0.0.3", https)  # the proxy on another host
    assert "; secure" in login_cookie(srv, "127.0.0.1", https)
    assert "; secure" not in login_cookie(srv, "127.0.0.1", {})
    # a stranger cannot claim https (nor another address) for itself
    forged = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.8"}
    assert "; secure" not in login_cookie(srv, "127.0.0.2", forged)
    log = srv.log.read_text()
    assert "198.51.100.7" in log and "198.51.100.8" not in log and "127.0.0.2" in log


def post_session(srv: Server, source: str, headers: dict[str, str]) -> httpx.Response:
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=30) as client:
        body = {"email": "alice@example.org", "password": PASSWORD}
        return client.post(f"{srv.url}/v1/session", json=body, headers=headers)


def test_no_password_in_clear_off_the_allowed_networks(srv: Server) -> None:
    """connections.cleartext_login_networks (here 127.0.0.1 alone): a password over plain HTTP
    from anywhere else is refused before it is looked at (403 tls_required); over TLS, or
    through the trusted proxy that says https, it is taken."""
    refused = post_session(srv, "127.0.0.2", {})
    assert refused.status_code == 403 and refused.json()["error"] == "tls_required"
    assert post_session(srv, "127.0.0.1", {}).status_code == 200
    https = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "198.51.100.9"}
    assert post_session(srv, "127.0.0.3", https).status_code == 200
    assert post_session(srv, "127.0.0.3", {"X-Forwarded-For": "198.51.100.9"}).status_code == 403
