"""HTTP rendering of every error, in one place: ``{"error": code, "message": text}``, and
its description in the OpenAPI document (``documented``)."""

from __future__ import annotations

import functools
import logging
import math
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from pochta import errors

log = logging.getLogger("pochta.http")

STATUS: list[tuple[type[errors.PochtaError], int]] = [
    (errors.ContentMismatch, 422),
    (errors.RangeNotSatisfiable, 416),
    (errors.AlreadyExists, 409),
    (errors.TooLarge, 413),
    (errors.InvalidInput, 400),
    (errors.NotFound, 404),
    (errors.ResetRequired, 403),
    (errors.TlsRequired, 403),
    (errors.AuthError, 401),
    (errors.RateLimited, 429),
    (errors.IntegrityError, 409),
    (errors.NoWritablePair, 507),
    (errors.StorageError, 503),
    (errors.CpuPoolUnavailable, 503),
    (errors.CpuPoolError, 503),
    (errors.Overloaded, 503),
    (errors.PochtaError, 500),
]


class ErrorOut(BaseModel):
    """The body of every error answer."""

    error: str = Field(description="a stable machine-readable code, e.g. message_not_found")
    message: str = Field(description="what went wrong, for people")


MEANING = {
    400: "malformed input the schema cannot say (a key, a range, an empty letter), or a JSON"
    " body nested deeper than http.max_json_depth",
    401: "no token, or a wrong or expired one; for a login: wrong e-mail or password",
    403: "the password leaked and must be reset (pochta user passwd) before a login; or a"
    " password was sent without TLS from outside connections.cleartext_login_networks",
    404: "not there (someone else's letter is not there either)",
    405: "the path exists, the method does not (Allow lists the ones that do)",
    409: "already exists, or the stored bytes differ from what was expected",
    413: "the body is larger than this endpoint takes (see the http.* and size settings)",
    416: "the range lies outside the file",
    422: "the request does not match the schema; the message names the field",
    429: "too many login attempts from this IP or for this account; see Retry-After",
    431: "the request line and headers are larger than http.max_header_size",
    503: "a disk, a database or the worker pool failed or is full, or the server holds all"
    " the request bodies it may in memory; try again",
    507: "no pair of disks can take the file",
}


def documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route or router: each status with its meaning and ErrorOut."""
    return {code: {"model": ErrorOut, "description": MEANING[code]} for code in codes}


EVERY_REQUEST = (413, 431)
"""What any request can get: a body or headers over their bound (server.limits)."""


def status_of(exc: errors.PochtaError) -> int:
    return next(status for cls, status in STATUS if isinstance(exc, cls))


def error_body(code: str, message: str) -> dict[str, str]:
    return {"error": code, "message": message}


async def _pochta(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.PochtaError)
    status = status_of(exc)
    if status >= 500:
        log.warning("%s %s: %s", request.method, request.url.path, exc.message)
    headers = {}
    if isinstance(exc, errors.AuthError) and status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, errors.RateLimited):
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    return JSONResponse(error_body(exc.code, exc.message), status_code=status, headers=headers)


async def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        parts.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
    return JSONResponse(error_body("invalid_request", "; ".join(parts)), status_code=422)


METHODS = frozenset({"get", "put", "post", "delete", "options", "head", "patch", "trace"})


@functools.lru_cache(maxsize=256)
def _template(path: str) -> re.Pattern[str]:
    return re.compile(re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(path)))


def allowed_methods(request: Request) -> str | None:
    """The methods the OpenAPI document lists for this request's path: the answer a 405's
    Allow owes (Starlette's names only the first route that matched, and GET, HEAD and PUT
    of a blob are three routes). None for a path the document does not describe."""
    paths: dict[str, dict[str, object]] = request.app.openapi().get("paths", {})
    for path, item in paths.items():
        if _template(path).fullmatch(request.url.path):
            return ", ".join(sorted(m.upper() for m in item if m in METHODS))
    return None


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    code = {401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed"}
    headers = dict(exc.headers or {})
    if exc.status_code == 405 and (allow := allowed_methods(request)) is not None:
        headers["Allow"] = allow
    return JSONResponse(
        error_body(code.get(exc.status_code, "http_error"), str(exc.detail)),
        status_code=exc.status_code,
        headers=headers,
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return JSONResponse(error_body("internal", "internal error; see the server log"), 500)


def install(app: FastAPI) -> None:
    app.add_exception_handler(errors.PochtaError, _pochta)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)
