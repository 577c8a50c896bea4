"""``POST /v1/scan``: a raw letter in, its verdict out (nothing stored, nothing counted);
``?explain=1`` adds what pushed the verdict most, in words."""

from __future__ import annotations

import io
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from pochta.errors import InvalidInput, Overloaded
from pochta.executors import run_in
from pochta.server.auth import require_service
from pochta.server.errors import documented
from pochta.types import Envelope

router = APIRouter(
    prefix="/v1",
    tags=["antispam"],
    dependencies=[Depends(require_service)],
    responses=documented(401, 422, 503),
)
LETTER = {"schema": {"type": "string", "format": "binary", "minLength": 1}}


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
) -> JSONResponse:
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
        analysis, verdict = await pochta.intake.analyze(raw, envelope, helo)
        del raw
    finally:
        held.release()
    if verdict is not None:  # decided in the worker process, with the analysis
        pochta.scanner.record(analysis, verdict)
    else:  # the counters and learned words (Redis or PostgreSQL, possibly): the deliveries
        # pool, as SMTP's decision; the explanation is the model's alone: the local pool
        verdict = await run_in(pochta.executors.deliveries, pochta.scanner.decide, analysis)
    result: dict[str, Any] = verdict.as_dict(pochta.scanner.authserv_id)
    if explain:
        reasons = await run_in(pochta.executors.local, pochta.scanner.explain, verdict)
        result["explanation"] = [r.as_dict() for r in reasons]
    # the verdict is plain JSON already: no re-encoding by the framework
    return JSONResponse(result)
