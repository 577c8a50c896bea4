"""What keeps the pages safe: the session cookie, CSRF tokens, Content-Security-Policy.

- **Session**: the same session token ``POST /v1/session`` gives, in a cookie that scripts
  cannot read (HttpOnly), sent only to this site (SameSite=Strict), only over TLS when the
  page came over TLS (Secure). Logging in goes through the same ``Users.login`` as the API,
  so the same login limits apply.
- **Device**: a successful login also leaves a device token (``pochta.guard.devices``:
  signed, bound to the account and its password, ``guard.login_known_days`` long) in a
  cookie sent only to the login form: this browser stays a known client of the account, so
  an attack on the account (guesses from many addresses) does not slow or stop its logins.
- **CSRF**: every form carries a token that is an HMAC of the session token (before login:
  of a random nonce kept in its own cookie) under ``web.secret``. A POST whose token is
  missing or wrong gets 403; a token is worthless in another session or after a logout.
- **CSP**: the pages run no script at all (``script-src`` is not granted, so nothing runs,
  not even inline); styles come from /web-static only. A letter's HTML is rendered in a
  sandboxed frame served with its own policy: no script, no form, no fetch but ``data:``
  images (and remote images only when the reader asks for them).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from starlette.requests import Request
from starlette.responses import Response

SESSION_COOKIE = "pochta_session"
LOGIN_COOKIE = "pochta_login"  # the nonce the login form's CSRF token is bound to
LANG_COOKIE = "pochta_lang"
DEVICE_COOKIE = "pochta_device"  # this browser logged in before (pochta.guard.devices)
DEVICE_PATH = "/webmail/login"  # the one place the device cookie is needed

PAGE_CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; frame-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)


def letter_csp(remote_images: bool) -> str:
    """The policy of a letter's own document (shown in a sandboxed frame): inline styles
    (letters carry them), ``data:`` images, remote images only when asked, nothing else."""
    images = "data: https: http:" if remote_images else "data:"
    return (
        f"default-src 'none'; style-src 'unsafe-inline'; img-src {images}; "
        "form-action 'none'; base-uri 'none'; frame-ancestors 'self'; "
        "sandbox allow-popups allow-popups-to-escape-sandbox"
    )


SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def protect(response: Response, csp: str = PAGE_CSP, *, frame: bool = False) -> Response:
    """Put the policy and the usual hardening headers on a page."""
    response.headers["Content-Security-Policy"] = csp
    response.headers["X-Frame-Options"] = "SAMEORIGIN" if frame else "DENY"
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value
    return response


def csrf_token(secret: str, binding: str) -> str:
    """The token of forms in the session (or login attempt) named by ``binding``."""
    mac = hmac.new(secret.encode(), b"csrf\x00" + binding.encode(), hashlib.sha256)
    return mac.hexdigest()


def csrf_ok(secret: str, binding: str | None, given: str | None) -> bool:
    if not binding or not given:
        return False
    return hmac.compare_digest(csrf_token(secret, binding), given)


def new_nonce() -> str:
    return secrets.token_urlsafe(24)


def is_tls(request: Request) -> bool:
    return request.url.scheme == "https"


def set_cookie(
    response: Response,
    request: Request,
    name: str,
    value: str,
    max_age: int | None,
    path: str = "/",
) -> None:
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=path,
        httponly=True,
        secure=is_tls(request),
        samesite="strict",
    )


def drop_cookie(response: Response, request: Request, name: str) -> None:
    response.delete_cookie(name, path="/", httponly=True, secure=is_tls(request), samesite="strict")
