"""The HTTP application: FastAPI, services opened and closed by the lifespan."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from pochta import __version__
from pochta.app import Pochta, build, service_token
from pochta.config import Settings
from pochta.server import blobs, errors, mailbox, scan, shingles, smtp


def create_app(settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        pochta = build(settings)
        app.state.pochta = pochta
        listeners: list[asyncio.Server] = []
        try:
            app.state.service_token = service_token(settings)
            pochta.start()  # the deletion worker, Valkyrie, the shingle counters' flusher
            if settings.smtp.enabled:
                listeners = await smtp.start(
                    pochta.mailbox, pochta.intake, settings.smtp, settings.data_dir / "spool"
                )
            yield
        finally:
            for server in listeners:
                server.close()
            for server in listeners:
                await server.wait_closed()
            await asyncio.to_thread(pochta.close)  # joins the threads; flushes the counters

    app = FastAPI(
        title="pochta",
        version=__version__,
        summary="Storage and protection core of a mail service",
        lifespan=lifespan,
    )
    errors.install(app)
    app.include_router(blobs.router)
    app.include_router(mailbox.router)
    app.include_router(scan.router)
    app.include_router(shingles.router)

    @app.get("/healthz", tags=["service"], summary="Liveness and readiness")
    def healthz(request: Request) -> JSONResponse:
        pochta: Pochta = request.app.state.pochta
        pairs = pochta.blobs.pairs()
        writable = sum(1 for p in pairs if p.flags.writable)
        status = "ok" if writable else "degraded"
        return JSONResponse(
            {"status": status, "pairs": len(pairs), "writable_pairs": writable},
            status_code=200 if writable else 503,
        )

    return app
