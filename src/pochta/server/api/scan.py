"""``POST /v1/scan``: a raw letter in, its verdict out (nothing stored, nothing counted);
``?explain=1`` adds what pushed the verdict most, in words.

Served by a plain Starlette route (``ROUTE``) ahead of the documented FastAPI one (as ``PUT
/v1/blobs/{key}``): FastAPI's dependency solving and parameter handling cost the scan about a
sixth of the server's GIL time, and finding it among the included routers another 7 %. The
plain route does what the documented one promises, in the same order: the service token
(constant time), then ``explain`` with pydantic's own message, then the body; the FastAPI
route stays for the OpenAPI document and serves nothing the plain one does not.

A scan a worker can finish alone (``Intake.scan``: no ``explain``, no sender authentication
left to the server) comes back as its answer's JSON (``intake.Scanned``), written in the
worker as ``JSONResponse`` would write it here: the server neither unpickles the analysis
nor encodes the verdict.
"""

from __future__ import annotations

import io
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from pydantic import TypeAdapter
from starlette.routing import Route

from pochta import metrics
from pochta.errors import InvalidInput, Overloaded
from pochta.executors import run_in
from pochta.mailbox.intake import Scanned, scan_answer
from pochta.server.api.errors import documented
from pochta.server.auth import authorize_service, require_service
from pochta.server.fields import checked
from pochta.types import Envelope

router = APIRouter(
    prefix="/v1",
    tags=["antispam"],
    dependencies=[Depends(require_service)],
    responses=documented(401, 422, 503),
)
JSON = "application/json"
LETTER = {"schema": {"type": "string", "format": "binary", "minLength": 1}}


_explain_check: TypeAdapter[bool] = TypeAdapter(bool)


async def _scan(
    request: Request, ip: str | None, mail_from: str | None, helo: str | None, explain: bool
) -> Response:
    pochta = request.app.state.pochta
    held = pochta.budget.share()  # the body is held whole: it is taken from the budget
    try:
        body = io.BytesIO()
        async for chunk in request.stream():  # bounded by smtp.max_message_size (server.limits)
            if not held.take(len(chunk)):
                raise Overloaded(
                    "the server holds all the letters it may in memory now; try again shortly"
                )
            body.write(chunk)
        # the letter is the buffer's own bytes, not a copy of them: the budget counted it once
        raw = body.getvalue()
        del body
        if not raw:
            raise InvalidInput("send the letter as the request body")
        envelope = Envelope(ip=ip, sender=mail_from) if ip or mail_from else None
        scanned = await pochta.intake.scan(raw, envelope, helo, explain)
        del raw
    finally:
        held.release()
    if isinstance(scanned, Scanned):  # parsed, decided and written in one worker process
        metrics.verdict(scanned.label, scanned.partial, scanned.seconds)
        return Response(scanned.body, media_type=JSON)
    analysis, verdict = scanned
    if verdict is not None:  # decided in the worker process, with the analysis
        pochta.scanner.record(analysis, verdict)
    else:  # the counters and learned words (Redis or PostgreSQL, possibly): the deliveries
        # pool, as SMTP's decision; the explanation is the model's alone: the local pool
        verdict = await run_in(pochta.executors.deliveries, pochta.scanner.decide, analysis)
    authserv_id = pochta.scanner.authserv_id
    if explain:
        answer = await run_in(
            pochta.executors.local, scan_answer, pochta.scanner, verdict, authserv_id, True
        )
    else:
        answer = scan_answer(pochta.scanner, verdict, authserv_id, False)
    return Response(answer, media_type=JSON)


async def scan_route(request: Request) -> Response:
    """``POST /v1/scan`` as served (see the module's docstring)."""
    authorize_service(request)
    q = request.query_params
    explain = q.get("explain")
    return await _scan(
        request,
        q.get("ip"),
        q.get("mail_from"),
        q.get("helo"),
        False if explain is None else checked(_explain_check, explain, ("query", "explain")),
    )


ROUTE = Route(f"{router.prefix}/scan", scan_route, methods=["POST"], include_in_schema=False)
"""The route that serves every scan: first in the application's routes (``server.http``), so
that no router is searched for it; the FastAPI route below documents it."""


@router.post(
    "/scan",
    summary="Score a raw letter: verdict, probability, score, rule hits, phishing signs",
    responses=documented(400),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"message/rfc822": LETTER, "application/octet-stream": LETTER},
            "description": "the raw letter; at most smtp.max_message_size bytes (else 413)."
            " It is held whole while it is scored, so it is taken from the server's"
            " memory_budget: 503 while that is spent",
        },
    },
)
async def scan(
    request: Request,
    ip: Annotated[str | None, Query(description="the sending client's IP")] = None,
    mail_from: Annotated[str | None, Query(description="the envelope sender")] = None,
    helo: Annotated[str | None, Query(description="the client's HELO name")] = None,
    explain: Annotated[
        bool,
        Query(
            description="also list the five features that pushed the verdict most, in English "
            "and Russian (the model's SHAP values; the rules' points when the rules decided)"
        ),
    ] = False,
) -> Response:
    # served by scan_route (the module's docstring): this one documents it (no docstring here:
    # it would become the operation's description in the OpenAPI document)
    return await _scan(request, ip, mail_from, helo, explain)
