"""``POST /v1/scan``: a raw letter in, its verdict out (nothing stored, nothing counted)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from starlette.concurrency import run_in_threadpool

from pochta.antispam.shingles import Envelope
from pochta.errors import InvalidInput, TooLarge
from pochta.server.auth import require_service

router = APIRouter(prefix="/v1", tags=["antispam"], dependencies=[Depends(require_service)])


@router.post(
    "/scan",
    summary="Score a raw letter: verdict, probability, score, rule hits, phishing signs",
    openapi_extra={
        "requestBody": {"content": {"message/rfc822": {}}, "required": True},
    },
)
async def scan(
    request: Request,
    ip: Annotated[str | None, Query(description="the sending client's IP")] = None,
    mail_from: Annotated[str | None, Query(description="the envelope sender")] = None,
    helo: Annotated[str | None, Query(description="the client's HELO name")] = None,
) -> dict[str, Any]:
    pochta = request.app.state.pochta
    limit = pochta.settings.smtp.max_message_size
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise TooLarge(f"the letter is larger than {limit} bytes")
    if not body:
        raise InvalidInput("send the letter as the request body")
    envelope = Envelope(ip=ip, sender=mail_from) if ip or mail_from else None
    verdict = await run_in_threadpool(pochta.scanner.scan, bytes(body), envelope, helo)
    result: dict[str, Any] = verdict.as_dict(pochta.scanner.authserv_id)
    return result
