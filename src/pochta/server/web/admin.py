"""The admin pages (users with the admin role: ``pochta user add --admin``,
``pochta user admin EMAIL``): storage and its savings over time, pairs (flags, free space,
set-flags, evacuate), Valkyrie per disk, verdicts per hour with the top phishing signs and
the shingles readers complained about most, login limits (who is limited; lift it), and the
leak audits. Charts are SVG drawn on the server (``charts``)."""

from __future__ import annotations

import contextlib
import math
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Annotated, Any

from fastapi import APIRouter, Form, Path
from markupsafe import Markup
from starlette.responses import Response

from pochta.antispam.model import store as model_store
from pochta.antispam.shingles.counters import Ref
from pochta.antispam.shingles.registry import ShingleType
from pochta.antispam.signs.registry import SPECS
from pochta.errors import InvalidInput, PochtaError
from pochta.guard.logins import LoginGuard
from pochta.history.recorder import OTHERS, parse_shingle_name
from pochta.server.web.charts import PALETTE, Series, hbars, human_bytes, line_chart, stacked_bars
from pochta.server.web.pages import Admin, PageRoute, PostedAdmin, Viewer, redirect, render
from pochta.types import PairFlag, StorageSample

router = APIRouter(prefix="/admin", route_class=PageRoute, include_in_schema=False)

PairId = Annotated[int, Path(ge=1, le=2**53 - 1)]
FLAGS = {"readonly": PairFlag.READONLY, "service": PairFlag.SERVICE, "locked": PairFlag.LOCKED}
SECTIONS = ("storage", "pairs", "valkyrie", "verdicts", "model", "logins", "audits")
HOURS_SHOWN = 48
TOP = 10
LOGINS_LISTED = 200  # IPs and accounts each on /admin/logins


def _page(v: Viewer, section: str, **context: Any) -> Response:
    return render(v, f"admin_{section}.html", section=section, sections=SECTIONS, **context)


def _hour() -> int:
    return int(time.time() // 3600)


@router.get("")
def home() -> Response:
    return redirect("/admin/storage")


# -- storage ---------------------------------------------------------------------------------
@router.get("/storage")
def storage(v: Admin) -> Response:
    s = v.pochta.mailbox.stats()
    stored = s["skeleton_bytes"] + s["blob_bytes"]
    now = StorageSample(time.time(), s["letters"], s["logical_bytes"], stored, s["physical_bytes"])
    samples = [*v.pochta.history.store.samples(time.time() - 30 * 86400, limit=2000), now]
    chart = line_chart(
        [
            Series("logical", PALETTE["logical"], [(p.at, p.logical_bytes) for p in samples]),
            Series("stored once", PALETTE["stored"], [(p.at, p.stored_bytes) for p in samples]),
            Series(
                "on disks (x2)", PALETTE["physical"], [(p.at, p.physical_bytes) for p in samples]
            ),
        ],
        title="bytes over time",
        y_label=human_bytes,
    )
    logical = s["logical_bytes"]
    savings = 100.0 * (logical - stored) / logical if logical else 0.0
    return _page(
        v,
        "storage",
        s=s,
        stored=stored,
        savings=savings,
        chart=chart,
        samples=len(samples) - 1,
        human_bytes=human_bytes,
    )


# -- pairs -----------------------------------------------------------------------------------
@router.get("/pairs")
def pairs(v: Admin) -> Response:
    listed = v.pochta.blobs.refresh_free(force=True)
    jobs = {job.pair: job for job in v.pochta.evacuations.jobs()}
    live = {p.id: v.pochta.blobs.filedb.count_live(p.id) for p in listed}
    return _page(
        v,
        "pairs",
        pairs=listed,
        jobs=jobs,
        live=live,
        flag_names=lambda f: [n for n, bit in FLAGS.items() if f & bit] or ["none"],
        flags=FLAGS,
        human_bytes=human_bytes,
    )


@router.post("/pairs/{pair_id}/flags")
def set_flags(
    v: PostedAdmin,
    pair_id: PairId,
    readonly: Annotated[bool, Form()] = False,
    service: Annotated[bool, Form()] = False,
    locked: Annotated[bool, Form()] = False,
) -> Response:
    value = PairFlag.NONE
    for on, bit in (
        (readonly, PairFlag.READONLY),
        (service, PairFlag.SERVICE),
        (locked, PairFlag.LOCKED),
    ):
        if on:
            value |= bit
    v.pochta.blobs.set_flags(pair_id, value)
    return redirect("/admin/pairs")


@router.post("/pairs/{pair_id}/evacuate")
def evacuate(v: PostedAdmin, pair_id: PairId) -> Response:
    v.pochta.evacuations.start(pair_id)
    return redirect("/admin/pairs")


# -- valkyrie --------------------------------------------------------------------------------
@router.get("/valkyrie")
def valkyrie(v: Admin) -> Response:
    summary = v.pochta.valkyrie.state.summary()
    where = {str(spec): (p.id, i) for p in v.pochta.blobs.pairs() for i, spec in enumerate(p.disks)}
    return _page(
        v, "valkyrie", summary=summary, where=where, enabled=v.pochta.settings.valkyrie.enabled
    )


# -- model -----------------------------------------------------------------------------------
MODEL_VERSIONS_SHOWN = 50


@router.get("/model")
def model(v: Admin) -> Response:
    """The live model (its version, threshold, what it was trained on, its figures), the
    versions kept (newest first) and the learning state of the installation's words."""
    p = v.pochta
    live = p.scanner.model
    versions = model_store.listing(p.models)
    current = next((row for row in versions if row["live"]), None)
    return _page(
        v,
        "model",
        live=live,
        info=live.info if live is not None else {},
        current=current,
        versions=list(reversed(versions))[:MODEL_VERSIONS_SHOWN],
        count=len(versions),
        follows=p.live_model is not None,
        loaded=p.live_model.version if p.live_model is not None else None,
        error=p.live_model.error if p.live_model is not None else None,
        check_seconds=p.settings.antispam.model_check_seconds,
        words=p.scanner.words.stats() if p.scanner.words is not None else None,
    )


# -- verdicts --------------------------------------------------------------------------------
def _sign_name(v: Viewer, symbol: str) -> str:
    """A sign's short name in the reader's language: its explanation's first clause."""
    spec = SPECS.get(symbol)
    if spec is None:
        return symbol
    text = spec.ru if v.lang == "ru" else spec.en
    return text[: min((i for c in ":;.,(" if (i := text.find(c)) >= 0), default=len(text))]


def _signs_chart(v: Viewer, top: list[tuple[str, int]], title: str) -> Markup:
    return hbars(
        [(_sign_name(v, s), n) for s, n in top],
        title=title,
        tips=[f"{s}: {SPECS[s].en if s in SPECS else s}" for s, _ in top],
    )


@router.get("/verdicts")
def verdicts(v: Admin) -> Response:
    history = v.pochta.history.store
    now = _hour()
    hours = list(range(now - HOURS_SHOWN + 1, now + 1))
    per: dict[str, dict[int, int]] = defaultdict(dict)
    for t in history.tallies("verdict", hours[0]):
        per[t.name][t.hour] = per[t.name].get(t.hour, 0) + t.n
    bars = stacked_bars(
        hours,
        [
            Series(label, PALETTE[label], sorted(per[label].items()))
            for label in ("ham", "spam", "phishing")
        ],
        title="letters per hour by verdict",
    )
    totals = {label: sum(per[label].values()) for label in ("ham", "spam", "phishing")}
    unscored = {action: 0 for action in ("inbox", "spam", "defer")}
    for t in history.tallies("unscored", hours[0]):
        unscored[t.name] = unscored.get(t.name, 0) + t.n
    signs_day = history.top("sign", now - 23, TOP)
    signs_2w = history.top("sign", now - 14 * 24 + 1, TOP)
    top = []
    for name, n in history.top("complaint", now - 14 * 24 + 1, TOP + 1):  # + 1: OTHERS
        try:
            type_, hash_, value = parse_shingle_name(name)
        except ValueError:
            continue
        top.append(TopShingle(_type_name(type_), value, f"{hash_:016x}", n, Ref(type_, hash_)))
    del top[TOP:]
    for row, counts in zip(top, _live_counts([row.ref for row in top], v), strict=True):
        row.counters = counts
    return _page(
        v,
        "verdicts",
        bars=bars,
        totals=totals,
        unscored=unscored,
        on_timeout=v.pochta.settings.antispam.on_timeout,
        signs_day=_signs_chart(v, signs_day, "phishing signs, last 24 hours"),
        signs_2w=_signs_chart(v, signs_2w, "phishing signs, last 14 days"),
        top=top,
    )


@dataclass
class TopShingle:
    type_name: str
    value: str
    hash: str
    complaints: int  # readers' "spam" in the history, 14 days
    ref: Ref
    counters: dict[str, int] | None = None  # the counters' own figures, 14 days


@dataclass
class LoginRow:
    kind: str  # ip | account
    subject: str
    failures: int  # in the last 24 hours
    state: str | None  # the limit as it stands, in words; None when it cannot be read
    limited: bool = False  # an IP refused, or an account whose unknown clients are slowed


def _type_name(type_: int) -> str:
    try:
        return ShingleType(type_).name.lower().replace("_", " ")
    except ValueError:
        return str(type_)


def _live_counts(refs: list[Ref], v: Viewer) -> list[dict[str, int] | None]:
    """The counters' own complaint / unspam figures over 14 days (None when they are down)."""
    if not refs:
        return []
    try:
        values = v.pochta.shingles.query(refs, ["14d"])
    except PochtaError:
        return [None] * len(refs)
    return [
        {k: int(c["14d"].get(k, 0)) for k in ("complaint", "unspam", "spam", "ham")} for c in values
    ]


# -- logins ----------------------------------------------------------------------------------
@router.get("/logins")
def logins(v: Admin) -> Response:
    guard = v.pochta.mailbox.logins
    history = v.pochta.history.store
    since = _hour() - 23
    rows: list[LoginRow] = []
    others: dict[str, int] = {}
    for series, kind in (("login_ip", "ip"), ("login_account", "account")):
        failures = dict(history.top(series, since, LOGINS_LISTED + 1))  # + 1: OTHERS
        others[kind] = failures.pop(OTHERS, 0)
        for subject, n in list(failures.items())[:LOGINS_LISTED]:
            row = LoginRow(kind, subject, n, None)
            if guard is not None:
                with contextlib.suppress(PochtaError):  # the store is down: "unknown"
                    row = _login_state(guard, row)
            rows.append(row)
    rows.sort(key=lambda r: (not r.limited, -r.failures))
    return _page(v, "logins", rows=rows, guard=guard, others=others)


def _login_state(guard: LoginGuard, row: LoginRow) -> LoginRow:
    if row.kind == "ip":
        d = guard.ip_state(row.subject)
        if d.allowed:
            return replace(row, state=f"{d.remaining:.1f} attempts left")
        return replace(row, state=f"retry in {math.ceil(d.retry_after)} s", limited=True)
    slot = guard.account_state(row.subject)
    counted = f"{slot.checks:.1f} checks counted by clients it does not know"
    if not guard.slowed(slot):
        return replace(row, state=f"{counted}; not slowed")
    wait = slot.wait if slot.granted else slot.retry_after
    return replace(row, state=f"{counted}; next check in {math.ceil(wait)} s", limited=True)


@router.post("/logins/reset")
def reset_login(
    v: PostedAdmin,
    kind: Annotated[str, Form(pattern="^(ip|account)$")],
    subject: Annotated[str, Form(min_length=1, max_length=320)],
) -> Response:
    guard = v.pochta.mailbox.logins
    if guard is None:
        raise InvalidInput("login limits are off")
    if kind == "ip":
        guard.reset(ip=subject)
    else:
        guard.reset(email=subject)
    return redirect("/admin/logins")


# -- leak audits -----------------------------------------------------------------------------
@router.get("/audits")
def audits(v: Admin) -> Response:
    return _page(v, "audits", audits=v.pochta.history.store.audits(20))
