"""HTTP rendering of every error, in one place: ``{"error": code, "message": text}``."""

from __future__ import annotations

import logging
import math

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
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
    (errors.AuthError, 401),
    (errors.RateLimited, 429),
    (errors.IntegrityError, 409),
    (errors.NoWritablePair, 507),
    (errors.StorageError, 503),
    (errors.WorkersUnavailable, 503),
    (errors.WorkerError, 503),
    (errors.PochtaError, 500),
]


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


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    code = {401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed"}
    return JSONResponse(
        error_body(code.get(exc.status_code, "http_error"), str(exc.detail)),
        status_code=exc.status_code,
        headers=exc.headers,
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return JSONResponse(error_body("internal", "internal error; see the server log"), 500)


def install(app: FastAPI) -> None:
    app.add_exception_handler(errors.PochtaError, _pochta)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(HTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)
