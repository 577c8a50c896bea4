"""Request bodies bounded before and while they arrive: an ASGI middleware, which also gives
every request its ``request_id`` (``pochta.logs``): the one middleware of pochta's own, as each
layer costs every request a coroutine of its own.

Each request gets the bound of its endpoint (``Bound``, chosen by ``bound_of`` from the method
and path). A ``Content-Length`` above the bound is refused with 413 before one byte of the body
is read. A body that grows past it while it streams (chunked, or a ``Content-Length`` that
lies) is cut off at the bound with 413. A JSON body nested deeper than ``max_depth`` is refused
with 400 as it streams. A refused request's connection is closed, so the rest of its body is
never read; what the server holds of a body is its bound plus one chunk (uvicorn pauses reading
while the application has not taken what came).

The application reads the body as usual (``Request.stream()``, FastAPI's JSON parsing); the
middleware only wraps ``receive``. When a refusal interrupts it, whatever the application
answers to the interruption is dropped and the refusal is sent instead.

Starlette 1.10 brought a ``RequestBodyLimitMiddleware`` (and FastAPI 0.165 ``max_body_size=``
per route). pochta keeps its own: its limits come from the settings when the application is
built while routes are declared at import; its refusal is pochta's JSON error and closes the
connection (Starlette answers in plain text and lets the server read the rest of the body);
it bounds JSON depth and headers too; and it runs on the older FastAPI that pochta supports.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pochta import logs


@dataclass(frozen=True)
class Bound:
    """What one endpoint accepts: ``body`` bytes at most; ``json``: the body is JSON (unless
    the request says another type), so its nesting is bounded too."""

    body: int
    json: bool = True


@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    message: str

    def response(self) -> JSONResponse:
        return JSONResponse(
            {"error": self.code, "message": self.message},
            status_code=self.status,
            headers={"Connection": "close"},
        )


class Refused(Exception):
    """Raised from ``receive`` into the application when its body broke the bound."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal


def too_large(limit: int) -> Refusal:
    return Refusal(413, "too_large", f"the request body is larger than {limit} bytes")


class JsonDepth:
    """The nesting depth of a JSON text read in pieces, without parsing it: brackets outside
    strings are counted, strings (with their escapes) skipped. ``feed`` says whether the text
    went deeper than ``max_depth``. Malformed JSON is the parser's business, not this one's."""

    _OUTSIDE = re.compile(rb'[\[\]{}"]')
    _INSIDE = re.compile(rb'["\\]')

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.depth = 0
        self.in_string = False
        self.escaped = False  # a backslash ended the previous piece

    def feed(self, piece: bytes) -> bool:
        pos, end = 0, len(piece)
        if self.escaped and piece:
            pos, self.escaped = 1, False
        while pos < end:
            if self.in_string:
                m = self._INSIDE.search(piece, pos)
                if m is None:
                    return False
                if piece[m.start()] == 0x5C:  # backslash: the next byte is escaped
                    if m.end() >= end:
                        self.escaped = True
                        return False
                    pos = m.end() + 1
                    continue
                self.in_string = False
            else:
                m = self._OUTSIDE.search(piece, pos)
                if m is None:
                    return False
                c = piece[m.start()]
                if c == 0x22:  # "
                    self.in_string = True
                elif c in (0x5B, 0x7B):  # [ {
                    self.depth += 1
                    if self.depth > self.max_depth:
                        return True
                else:
                    self.depth = max(0, self.depth - 1)
            pos = m.end()
        return False


def _is_json(headers: Headers) -> bool:
    """Whether FastAPI will parse the body as JSON: application/json or application/*+json
    (FastAPI's strict content type: a body without one is not parsed)."""
    media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


class RequestBounds:
    """The middleware. ``bound_of(method, path)`` gives each request its bound; headers larger
    than ``max_header_size`` in all (names, values and the request target, as on the wire) get
    431. (The HTTP server's own limit keeps a header block that never ends from being held:
    pochta's httptools protocol counts the head as it is parsed and answers the same 431
    (``pochta.server.connections``), h11's ``max_incomplete_event_size`` answers 400; this
    one makes the limit exact with either parser.) Outermost of the application's own
    middleware: every line logged while a request is served, its refusal included, carries
    ``request_id`` (uvicorn's access line too, which it writes from within the request)."""

    def __init__(
        self,
        app: ASGIApp,
        bound_of: Callable[[str, str], Bound],
        max_depth: int,
        max_header_size: int,
    ) -> None:
        self.app = app
        self.bound_of = bound_of
        self.max_depth = max_depth
        self.max_header_size = max_header_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with logs.bound(request_id=logs.new_id()):  # in this layer: one coroutine less
            head = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
            head += sum(len(name) + len(value) + 4 for name, value in scope["headers"])
            if head > self.max_header_size:
                message = (
                    f"the request line and headers are larger than {self.max_header_size} bytes"
                )
                await Refusal(431, "headers_too_large", message).response()(scope, receive, send)
                return
            bound = self.bound_of(scope["method"], scope["path"])
            headers = Headers(scope=scope)
            length = headers.get("content-length", "")
            if length.isdigit() and int(length) > bound.body:
                await too_large(bound.body).response()(scope, receive, send)
                return
            depth = JsonDepth(self.max_depth) if bound.json and _is_json(headers) else None
            received = 0
            refusal: Refusal | None = None
            started = False

            async def bounded_receive() -> Message:
                nonlocal received, refusal
                if refusal is not None:
                    raise Refused(refusal)
                message = await receive()
                if message["type"] == "http.request":
                    body: bytes = message.get("body", b"")
                    received += len(body)
                    if received > bound.body:
                        refusal = too_large(bound.body)
                    elif depth is not None and depth.feed(body):
                        refusal = Refusal(
                            400,
                            "json_too_deep",
                            f"the JSON body is nested deeper than {self.max_depth} levels",
                        )
                    if refusal is not None:
                        raise Refused(refusal)
                return message

            async def send_unless_refused(message: Message) -> None:
                nonlocal started
                if refusal is not None and not started:
                    return  # the application's answer to a body it could not read
                started = started or message["type"] == "http.response.start"
                await send(message)

            with contextlib.suppress(Refused):  # refusal says what to answer
                await self.app(scope, bounded_receive, send_unless_refused)
            if refusal is not None and not started:
                await refusal.response()(scope, receive, send)
