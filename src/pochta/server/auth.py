"""Service authentication: a bearer token compared in constant time; and where a user's
password may come from: over TLS, or in clear only from ``connections.cleartext_login_networks``
(``app.state.cleartext``)."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param

from pochta.errors import TlsRequired
from pochta.netaddr import within

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="service_token",
    description="the service token (settings: service_token)",
)


async def require_service(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    expected: str = request.app.state.service_token
    if credentials is None or not hmac.compare_digest(
        credentials.credentials.encode(), expected.encode()
    ):
        raise HTTPException(
            401, "a valid service token is required", headers={"WWW-Authenticate": "Bearer"}
        )


def authorize_service(request: Request) -> None:
    """``require_service`` without FastAPI's dependency machinery, for the plain routes ahead
    of documented ones (``PUT /v1/blobs/{key}``, ``POST /v1/scan``): the same bearer parsing
    (``HTTPBearer``'s), constant-time comparison and 401."""
    scheme, token = get_authorization_scheme_param(request.headers.get("authorization"))
    expected: str = request.app.state.service_token
    if (
        scheme.lower() != "bearer"
        or not token
        or not hmac.compare_digest(token.encode(), expected.encode())
    ):
        raise HTTPException(
            401, "a valid service token is required", headers={"WWW-Authenticate": "Bearer"}
        )


def password_allowed(request: Request) -> None:
    """TlsRequired unless the request came over TLS (or from a trusted proxy that says so:
    ``http.trusted_proxies``) or from a network where a password may travel in clear."""
    if request.url.scheme == "https":
        return
    client = request.client.host if request.client is not None else ""
    if not within(client, request.app.state.cleartext):
        raise TlsRequired(
            "passwords are taken over HTTPS only from this address; use https:// (or add"
            " its network to connections.cleartext_login_networks)"
        )
