"""``GET /metrics``: Prometheus text format (prometheus-client).

What the service layer recorded (:mod:`pochta.metrics`, every process of this server), then
what is read at scrape time: each pair's flags and each disk's free bytes (the PairDB), and
Valkyrie's totals per disk (its state file: they add up every pass of every process that
scrubbed the disk, `pochta valkyrie run` included, and survive restarts).

Access: with ``metrics.token`` set, a request must carry ``Authorization: Bearer <token>``
(401 otherwise), from anywhere. Without it, only clients on a loopback address are answered
(403 otherwise): a Prometheus on the same host, or one that reaches pochta through a tunnel or
a proxy on it. The figures name no user, but disk paths and volumes are an operator's business.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from pochta import metrics
from pochta.blobs.valkyrie import COUNT_NAMES
from pochta.server.api.errors import ErrorOut

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from pochta.app import Pochta

router = APIRouter(tags=["service"])

FLAGS = ("readonly", "service", "locked")


class Scraped:
    """A prometheus-client collector of what is read when scraped."""

    def __init__(self, pochta: Pochta) -> None:
        self.pochta = pochta

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        pairs = self.pochta.blobs.pairs()
        writable = GaugeMetricFamily(
            "pochta_pair_writable", "1 when the pair takes new files (no flag set)", labels=["pair"]
        )
        flag = GaugeMetricFamily(
            "pochta_pair_flag", "1 when the pair has this flag", labels=["pair", "flag"]
        )
        free = GaugeMetricFamily(
            "pochta_disk_free_bytes", "Free bytes of each disk, as last measured",
            labels=["pair", "disk"],
        )  # fmt: skip
        for pair in pairs:
            writable.add_metric([str(pair.id)], 1.0 if pair.flags.writable else 0.0)
            for name in FLAGS:
                on = pair.flags & getattr(type(pair.flags), name.upper())
                flag.add_metric([str(pair.id), name], 1.0 if on else 0.0)
            for spec, nbytes in zip(pair.disks, pair.free, strict=True):
                free.add_metric([str(pair.id), str(spec)], float(nbytes))
        yield writable
        yield flag
        yield free
        summary: dict[str, Any] = self.pochta.valkyrie.state.summary()
        actions = CounterMetricFamily(
            "pochta_valkyrie_files",
            "What Valkyrie did per disk since the data directory was made: checked, verified,"
            " repaired, quarantined, purged, orphans, strays, tmp_removed, space1_dropped,"
            " errors",
            labels=["disk", "action"],
        )
        read = CounterMetricFamily(
            "pochta_valkyrie_read_bytes", "Bytes Valkyrie read per disk", labels=["disk"]
        )
        passes = CounterMetricFamily(
            "pochta_valkyrie_passes", "Whole passes finished per disk", labels=["disk"]
        )
        last = GaugeMetricFamily(
            "pochta_valkyrie_last_pass_timestamp_seconds",
            "When the last whole pass over the disk ended (unix time)",
            labels=["disk"],
        )
        for disk in summary["disks"]:
            for name in COUNT_NAMES:
                if name != "bytes":
                    actions.add_metric([disk["disk"], name], float(disk[name]))
            read.add_metric([disk["disk"]], float(disk["bytes"]))
            passes.add_metric([disk["disk"]], float(disk["passes"]))
            if disk["last_pass"] is not None:
                last.add_metric([disk["disk"]], float(disk["last_pass"]))
        yield actions
        yield read
        yield passes
        yield last


def _allowed(request: Request) -> None:
    token = request.app.state.pochta.settings.metrics.token
    if token is not None:
        given = request.headers.get("authorization", "")
        expected = f"Bearer {token.get_secret_value()}"
        if not hmac.compare_digest(given.encode(), expected.encode()):
            raise HTTPException(
                401, "a valid metrics token is required", headers={"WWW-Authenticate": "Bearer"}
            )
        return
    host = request.client.host if request.client is not None else ""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise HTTPException(
            403, "metrics are served to loopback clients only (or set metrics.token)"
        )


@router.get(
    "/metrics",
    summary="Prometheus metrics (text format)",
    response_class=Response,
    responses={
        200: {
            "description": "the metrics, in Prometheus' text format",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        401: {"model": ErrorOut, "description": "metrics.token is set and was not given"},
        403: {"model": ErrorOut, "description": "not a loopback client, and no metrics.token"},
    },
)
async def scrape(request: Request) -> Response:
    _allowed(request)
    pochta = request.app.state.pochta
    body, content_type = await run_in_threadpool(metrics.exposition, Scraped(pochta))
    return Response(body, media_type=content_type)
