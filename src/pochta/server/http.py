"""The HTTP application: FastAPI, services opened and closed by the lifespan."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from pochta import __version__, logs
from pochta.app import Pochta, build, connection_gate, server_tls, service_token, web_secret
from pochta.config import Settings
from pochta.netaddr import parse_networks
from pochta.server import imap, smtp, web
from pochta.server.api import blobs, errors, lists, mailbox, scan, shingles
from pochta.server.api import metrics as metrics_api
from pochta.server.api.limits import Bound, RequestBounds
from pochta.server.connections import Doorman
from pochta.server.imapstore import ImapStore
from pochta.server.passwords import PasswordSlots
from pochta.tls import ServerTLS

log = logging.getLogger("pochta.http")


class HealthOut(BaseModel):
    status: Literal["ok", "degraded"]
    pairs: int
    writable_pairs: int
    checked_seconds_ago: float | None  # since the pair database last answered the check
    problem: str | None = None  # why degraded
    # smtp.answer = "queued": seconds the queue's runner has made no progress while letters
    # are due (0: fine), and the age of the oldest letter waiting (None: none)
    queue_stalled_seconds: float | None = None
    queue_oldest_seconds: float | None = None


def bound_of(settings: Settings) -> Callable[[str, str], Bound]:
    """The body bound of each endpoint: a letter for the scan, a file for a blob upload, a few
    KB for a login, ``http.max_json_body`` for every other (JSON) body."""
    h = settings.http

    def bound(method: str, path: str) -> Bound:
        if path == "/v1/scan":
            return Bound(settings.smtp.max_message_size, json=False)
        if method == "PUT" and path.startswith("/v1/blobs/"):
            return Bound(settings.blobs.max_upload_size, json=False)
        if path == "/v1/session":
            return Bound(h.max_login_body)
        if path == "/webmail/login":
            return Bound(h.max_login_body, json=False)
        return Bound(h.max_json_body)

    return bound


def create_app(
    settings: Settings,
    sockets: Mapping[str, socket.socket] | None = None,
    *,
    tls: ServerTLS | None = None,
    doorman: Doorman | None = None,
) -> FastAPI:
    """The application. ``sockets``: listening sockets bound beforehand, by listener name
    (``smtp``, ``lmtp``), used instead of binding their ports (``serve --processes``);
    ``tls``: the certificate this process already loaded (``pochta serve``, for HTTPS);
    default: loaded from ``[tls]`` at startup; ``doorman``: the connection limits, shared
    with the HTTP listener (``pochta serve``); default: made (and closed) here for SMTP
    and IMAP."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await walk_routes(app)  # before anything listens: it holds the loop meanwhile
        pochta = build(settings, tls=tls if tls is not None else server_tls(settings))
        app.state.pochta = pochta
        listeners: list[asyncio.Server] = []
        hangup = False
        imap_server: imap.ImapServer | None = None
        own_doorman: Doorman | None = None
        try:
            door = doorman
            if door is None and (settings.smtp.enabled or settings.imap.enabled):
                door = own_doorman = Doorman(connection_gate(settings))
            app.state.service_token = service_token(settings)
            app.state.web_secret = web_secret(settings)
            logs.redact(app.state.service_token)
            pochta.start()  # the deletion worker, Valkyrie, the shingle counters' flusher
            if settings.smtp.enabled:
                ctx = pochta.tls.context if pochta.tls is not None else None
                listeners = await smtp.start(
                    pochta.mailbox,
                    pochta.intake,
                    settings.smtp,
                    settings.data_dir / "spool",
                    sockets=sockets,
                    tls_context=ctx if settings.tls.smtp else None,
                    lmtp_tls_context=ctx if settings.tls.lmtp else None,
                    doorman=door,
                    budget=pochta.budget,
                    executors=pochta.executors,
                    imap=settings.imap if settings.imap.enabled else None,
                    queue=pochta.queue,
                )
            if settings.imap.enabled:
                store = ImapStore(pochta.mailbox, wake_deletions=pochta.deletion_job.wake)
                server_tls_ = pochta.tls
                imap_server, imap_listeners = await imap.start(
                    store,
                    settings.imap,
                    settings.smtp,
                    # the context as it is at each handshake: a SIGHUP reload applies at once
                    tls=(lambda: server_tls_.context) if server_tls_ is not None else None,
                    require_tls=settings.tls.require_starttls,
                    sockets=sockets,
                    doorman=door,
                    budget=pochta.budget,
                    intake=pochta.intake,
                    spool_dir=settings.data_dir / "spool",
                    cleartext=settings.connections.cleartext_login_networks,
                    passwords=app.state.passwords,
                )
                listeners += imap_listeners
            hangup = _on_sighup(pochta)
            yield
        finally:
            if hangup:
                asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
            for server in listeners:
                server.close()
            if imap_server is not None:
                await imap_server.close()  # BYE to the sessions still open
            for server in listeners:
                await server.wait_closed()
            if pochta.queue is not None:
                await pochta.queue.stop()  # the letters not delivered stay queued
            if own_doorman is not None:
                own_doorman.close()
            await asyncio.to_thread(pochta.close)  # joins the threads; flushes the counters

    # /docs and /redoc from the assets fastapi-offline ships: no CDN, they work offline
    app = FastAPIOffline(
        title="pochta",
        version=__version__,
        summary="Storage and protection core of a mail service",
        lifespan=lifespan,
        responses=errors.documented(*errors.EVERY_REQUEST),
        # pochta's metrics are Prometheus' (/metrics); FastAPI's own OpenTelemetry is off, so
        # no request asks whether a tracer, meter or logger provider was configured
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    errors.install(app)
    # where a password may come in clear (server.auth.password_allowed); parsed once
    app.state.cleartext = parse_networks(settings.connections.cleartext_login_networks)
    # one bound for the password checks of every door (argon2: 64 MiB each)
    app.state.passwords = PasswordSlots(settings.guard.password_checks_at_once)
    app.add_middleware(
        RequestBounds,
        bound_of=bound_of(settings),
        max_depth=settings.http.max_json_depth,
        max_header_size=settings.http.max_header_size,
    )
    # the scan and the upload are served by plain routes, first of all (the FastAPI routes of
    # the same paths document them; a wrong method still gets 405 with the documented Allow)
    app.router.routes[:0] = [scan.ROUTE, blobs.ROUTE]
    app.include_router(blobs.router)
    app.include_router(mailbox.router)
    app.include_router(lists.router)
    app.include_router(scan.router)
    app.include_router(shingles.router)
    if settings.web.enabled:
        web.install(app)  # /webmail, /admin: HTML pages, not in the OpenAPI document
    if settings.metrics.enabled:
        app.include_router(metrics_api.router)

    @app.get(
        "/healthz",
        tags=["service"],
        summary="Liveness and readiness",
        description="From a background check of the pair database (every"
        " http.health_interval_seconds); never waits for the database itself.",
        responses={
            503: {
                "model": HealthOut,
                "description": "no pair of disks takes writes, or the pair database has not"
                " answered for http.health_stale_seconds",
            }
        },
    )
    async def healthz(request: Request) -> JSONResponse:
        pochta: Pochta = request.app.state.pochta
        h = pochta.health.report()
        health = HealthOut(
            status=h.status,
            pairs=h.pairs,
            writable_pairs=h.writable_pairs,
            checked_seconds_ago=_round(h.checked_seconds_ago),
            problem=h.problem,
            queue_stalled_seconds=_round(h.queue_stalled_seconds),
            queue_oldest_seconds=_round(h.queue_oldest_seconds),
        )
        return JSONResponse(health.model_dump(), status_code=200 if h.status == "ok" else 503)

    return app


def _round(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)


WALK_PATH = "/.pochta/walk"
"""A path no route serves: its request walks every route and finds none."""


async def walk_routes(app: FastAPI) -> None:
    """Every route looked at once before the first request comes. FastAPI (0.16x) prepares
    an included router's routes (their parameters' pydantic schemas) when the first request
    that reaches them is matched: the first request after a start took 3.2 s at load 3.5,
    during which no other was answered. A request for a path nothing serves, through the
    router alone (no middleware: nothing counted or logged), walks them all."""
    scope: dict[str, object] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": WALK_PATH,
        "raw_path": WALK_PATH.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [],
        "client": None,
        "server": None,
        "app": app,
    }

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: object) -> None:
        return None

    # not found: raised (an application's exception handlers answer it), or answered
    with contextlib.suppress(StarletteHTTPException):
        await app.router(scope, receive, send)


def _on_sighup(pochta: Pochta) -> bool:
    """SIGHUP reloads the certificate (new handshakes use it; connections stay up). Without
    TLS it is logged and ignored rather than ending the server. False when this is not the
    main thread (a test client), where signals cannot be handled."""

    def hangup() -> None:
        if pochta.tls is None:
            log.info("SIGHUP: no certificate to reload ([tls] is not configured)")
        else:
            pochta.tls.reload()

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, hangup)
        return True
    return False
