"""The HTTP application: FastAPI, services opened and closed by the lifespan."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel

from pochta import __version__
from pochta.app import Pochta, build, service_token
from pochta.config import Settings
from pochta.server import blobs, errors, imap, mailbox, scan, shingles, smtp
from pochta.server.imapstore import ImapStore
from pochta.server.limits import Bound, RequestBounds


class HealthOut(BaseModel):
    status: Literal["ok", "degraded"]
    pairs: int
    writable_pairs: int


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
        return Bound(h.max_json_body)

    return bound


def create_app(settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pochta = build(settings)
        app.state.pochta = pochta
        listeners: list[asyncio.Server] = []
        imap_server: imap.ImapServer | None = None
        try:
            app.state.service_token = service_token(settings)
            pochta.start()  # the deletion worker, Valkyrie, the shingle counters' flusher
            if settings.smtp.enabled:
                listeners = await smtp.start(
                    pochta.mailbox, pochta.intake, settings.smtp, settings.data_dir / "spool"
                )
            if settings.imap.enabled:
                store = ImapStore(pochta.mailbox, wake_deletions=pochta.deletions.wake)
                # tls: the [tls] settings' context provider plugs in here (STARTTLS, IMAPS)
                imap_server, imap_listeners = await imap.start(
                    store, settings.imap, settings.smtp.max_message_size
                )
                listeners += imap_listeners
            yield
        finally:
            for server in listeners:
                server.close()
            if imap_server is not None:
                await imap_server.close()  # BYE to the sessions still open
            for server in listeners:
                await server.wait_closed()
            await asyncio.to_thread(pochta.close)  # joins the threads; flushes the counters

    # /docs and /redoc from the assets fastapi-offline ships: no CDN, they work offline
    app = FastAPIOffline(
        title="pochta",
        version=__version__,
        summary="Storage and protection core of a mail service",
        lifespan=lifespan,
        responses=errors.documented(*errors.EVERY_REQUEST),
    )
    errors.install(app)
    app.add_middleware(
        RequestBounds,
        bound_of=bound_of(settings),
        max_depth=settings.http.max_json_depth,
        max_header_size=settings.http.max_header_size,
    )
    app.include_router(blobs.router)
    app.include_router(mailbox.router)
    app.include_router(scan.router)
    app.include_router(shingles.router)

    @app.get(
        "/healthz",
        tags=["service"],
        summary="Liveness and readiness",
        responses={503: {"model": HealthOut, "description": "no pair of disks takes writes"}},
    )
    def healthz(request: Request) -> JSONResponse:
        pochta: Pochta = request.app.state.pochta
        pairs = pochta.blobs.pairs()
        writable = sum(1 for p in pairs if p.flags.writable)
        status = "ok" if writable else "degraded"
        health = HealthOut(status=status, pairs=len(pairs), writable_pairs=writable)
        return JSONResponse(health.model_dump(), status_code=200 if writable else 503)

    return app
