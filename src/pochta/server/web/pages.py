"""What every page shares: the templates, who is looking (``Viewer``), the CSRF check, and
the route class that turns errors into HTML pages (the API's JSON errors stay the API's)."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Form, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException
from starlette.responses import HTMLResponse, RedirectResponse, Response

from pochta import errors
from pochta.app import Pochta
from pochta.server.api.errors import status_of
from pochta.server.web import security
from pochta.server.web.charts import human_bytes
from pochta.server.web.i18n import Lang, choose, word
from pochta.types import User

log = logging.getLogger("pochta.http")

templates = Jinja2Templates(directory=Path(__file__).parent / "templates")
templates.env.globals["word"] = word
templates.env.filters["datetime"] = lambda ts: time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts))
templates.env.filters["filesize"] = human_bytes


class LoginRequired(Exception):
    """No valid session: the page sends the reader to the login form."""


class Forbidden(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason  # a WORDS key


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who is looking at a page, in which language, with the token their forms carry."""

    request: Request
    lang: Lang
    user: User | None
    session: str | None  # the session token (from the cookie), when logged in
    csrf: str
    binding: str | None = None  # what the forms' CSRF token is bound to: session or login nonce

    @property
    def pochta(self) -> Pochta:
        pochta: Pochta = self.request.app.state.pochta
        return pochta

    def word(self, key: str, **values: object) -> str:
        return word(self.lang, key, **values)


def secret(request: Request) -> str:
    value: str = request.app.state.web_secret
    return value


def _lang(request: Request) -> Lang:
    return choose(request.cookies.get(security.LANG_COOKIE), request.headers.get("accept-language"))


def viewer(request: Request) -> Viewer:
    """Whoever is looking: a user when the session cookie is valid, else nobody. Worked out
    once a request (kept on ``request.state``: an error page does not look again)."""
    known: Viewer | None = getattr(request.state, "pochta_viewer", None)
    if known is not None:
        return known
    pochta: Pochta = request.app.state.pochta
    token = request.cookies.get(security.SESSION_COOKIE)
    user = None
    if token and len(token) <= 128:
        try:
            user = pochta.mailbox.user_by_id(pochta.mailbox.authenticate(token))
        except errors.InvalidCredentials:
            user = None
    if user is None or token is None:
        session = None
        binding = request.cookies.get(security.LOGIN_COOKIE) or None
    else:
        session = token
        binding = "session:" + token
    csrf = security.csrf_token(secret(request), binding) if binding else ""
    v = Viewer(request, _lang(request), user, session, csrf, binding)
    request.state.pochta_viewer = v
    return v


def _as_reader(v: Viewer) -> Viewer:
    if v.user is None:
        raise LoginRequired
    return v


def _as_admin(v: Viewer) -> Viewer:
    if v.user is None or not v.user.admin:
        raise Forbidden("forbidden_admin")
    return v


def checked(
    v: Annotated[Viewer, Depends(viewer)],
    csrf: Annotated[str, Form(max_length=128)] = "",
) -> Viewer:
    """A form post whose CSRF token belongs to this session (or login attempt), else 403."""
    if not security.csrf_ok(secret(v.request), v.binding, csrf):
        raise Forbidden("forbidden_csrf")
    return v


def reader(v: Annotated[Viewer, Depends(viewer)]) -> Viewer:
    """A logged-in reader, else off to the login form."""
    return _as_reader(v)


def admin(v: Annotated[Viewer, Depends(reader)]) -> Viewer:
    """An administrator, else 403."""
    return _as_admin(v)


def posted_reader(v: Annotated[Viewer, Depends(checked)]) -> Viewer:
    """``reader``, for a form post with a valid CSRF token."""
    return _as_reader(v)


def posted_admin(v: Annotated[Viewer, Depends(posted_reader)]) -> Viewer:
    """``admin``, for a form post with a valid CSRF token."""
    return _as_admin(v)


Anyone = Annotated[Viewer, Depends(viewer)]
Reader = Annotated[Viewer, Depends(reader)]
Admin = Annotated[Viewer, Depends(admin)]
Posted = Annotated[Viewer, Depends(checked)]
PostedReader = Annotated[Viewer, Depends(posted_reader)]
PostedAdmin = Annotated[Viewer, Depends(posted_admin)]


def render(
    v: Viewer,
    template: str,
    status_code: int = 200,
    headers: dict[str, str] | None = None,
    **context: Any,
) -> Response:
    response = templates.TemplateResponse(
        v.request,
        template,
        {"v": v, "lang": v.lang, **context},
        status_code=status_code,
        headers=headers,
    )
    return security.protect(response)


def redirect(url: str) -> Response:
    return security.protect(RedirectResponse(url, status_code=303))


def _error_page(request: Request, status: int, title: str, text: str | None = None) -> Response:
    """The HTML page of an error; ``text`` None: the title's own explanation (``<title>_text``)."""
    try:
        v = viewer(request)
    except Exception:  # the index itself is failing: the page still says so, as nobody
        v = Viewer(request, _lang(request), None, None, "")
    headers = {}
    if status == 429:
        headers["Retry-After"] = "60"
    body = v.word(f"{title}_text") if text is None else text
    return render(v, "error.html", status, headers, title=v.word(title), text=body)


def _problems(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        parts.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
    return "; ".join(parts)


def _server_error(request: Request) -> Response:
    """The 500 page, as HTML whatever failed (a plain one when even the template fails)."""
    try:
        return _error_page(request, 500, "error", word(_lang(request), "server_error"))
    except Exception:
        log.exception("the error page itself failed on %s", request.url.path)
        return security.protect(
            HTMLResponse("<!doctype html><title>500</title><h1>Something went wrong</h1>", 500)
        )


class PageRoute(APIRoute):
    """A page's route: no login sends to the login form; errors are HTML pages with the
    status the API would give (someone else's letter: 404, like one that is not there); any
    other exception is logged once and answered with the HTML 500 page."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page(request: Request) -> Response:
            try:
                return await handler(request)
            except LoginRequired:
                return redirect("/webmail/login")
            except Forbidden as exc:
                return _error_page(request, 403, "forbidden", word(_lang(request), exc.reason))
            except errors.RateLimited as exc:
                response = _error_page(request, 429, "error", exc.message)
                response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
                return response
            except errors.PochtaError as exc:
                status = status_of(exc)
                if status == 404:
                    return _error_page(request, 404, "not_found")
                return _error_page(request, status, "error", exc.message)
            except RequestValidationError as exc:
                if any(err.get("loc", ("",))[0] == "path" for err in exc.errors()):
                    return _error_page(request, 404, "not_found")
                return _error_page(request, 400, "error", _problems(exc))
            except HTTPException as exc:
                return _error_page(request, exc.status_code, "error", str(exc.detail))
            except Exception:
                log.exception("unexpected error on %s %s", request.method, request.url.path)
                return _server_error(request)

        return page
