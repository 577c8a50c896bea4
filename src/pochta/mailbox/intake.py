"""Letters coming in: parsed, analyzed and split off the event loop, in worker processes.

The CPU-bound half of a delivery (:func:`pochta.mailbox.prepare.prepare`) and of a scan runs in
the CPU pool (:mod:`pochta.cpupool`): ``antispam.pool_processes`` processes, one per core by
default, each holding its own :class:`~pochta.antispam.verdict.Analyzer` built once by
:func:`init_pool_process`. The server's event loop only awaits the result, so a letter that takes
long to analyze delays no other client, and no letter is analyzed under the server's GIL.

Two limits keep one letter from costing much: the analysis budget (``antispam.budget_seconds``:
stages not started in time are skipped and the verdict says ``partial``) and the deadline
(``antispam.deadline_seconds``): a worker still busy then is killed and replaced, and the
letter is unscored. ``antispam.on_timeout`` says what that means: delivered unsplit, kept whole
(``partial=timeout``), as ham to the Inbox (``inbox``, the default: a letter is never refused
or retried for being slow) or to Spam (``spam``); or not delivered but deferred (``defer``: the
worker's error goes up and SMTP answers 451). A full queue (``CpuPoolUnavailable``) is always
a refusal: the SMTP client is told to try again later (451).

Letters of at most :data:`SMALL` bytes (most mail) are taken before bigger ones, so that a
flood of big letters, each costing more to parse and split, cannot hold up everyone else's.

With ``antispam.pool_processes = 0`` the same work runs in a thread of the server (tests, a tiny
install): simpler, but a slow letter then competes with the event loop for the GIL.

A big letter reaches the worker as the path of the file the SMTP server spooled it to, not as
bytes: the server never holds it whole (its trace header, ``prefix``, travels beside it).
:meth:`Intake.prepare_apart` (IMAP APPEND) keeps the way back small too: the worker writes each
big extracted part to a file in a directory the caller names (and removes) and sends back its
place, not its bytes (a 50 MB letter's parts would otherwise arrive whole, twice over while
they are unpickled).

Only a letter no worker could prepare (past the deadline, or its worker died) is read whole
into the server, to be stored unsplit; so its bytes are taken from the server's memory budget
(:mod:`pochta.budget`) first, into the caller's share (``held``: the letter's spool's,
given back once the letter is stored). When the budget cannot hold them the letter is not
read: :class:`~pochta.errors.Overloaded` goes up (SMTP answers 451, IMAP ``NO
[UNAVAILABLE]``), as a letter's memory must never grow past the budget. Without workers
(``antispam.pool_processes = 0``) every letter is parsed in the server, and none of it is counted.

Sender authentication (``antispam.dns = "system"``) never makes a worker wait for DNS: the
server asks (:mod:`pochta.antispam.auth.authenticator`). SPF starts when the letter is handed
in, beside the worker's pass; the pass returns the DKIM keys and DMARC policies the letter
needs (``Analysis.plan``), which the server then asks; signatures with a key are verified in
a second, short task (``verify_in_pool``: the body hash and RSA; a small letter's taken
before big letters, as its first pass); DMARC is judged in the server. A sender whose DNS
never answers costs a letter its ``antispam.dns_lifetime`` of waiting on the event loop, and
no worker time.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import CancelledError, Executor, Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pochta import metrics
from pochta.antispam import packed
from pochta.antispam.auth.authenticator import Authenticator, LetterAuth
from pochta.antispam.auth.resolver import DnsResolver
from pochta.antispam.auth.results import DkimResult, DkimStep, Keys, finish_dkim, unverified
from pochta.antispam.shingles.counters import pack
from pochta.antispam.shingles.registry import update_refs
from pochta.antispam.signs.forwarders import Forwarders
from pochta.antispam.tokens import TokenTable
from pochta.antispam.verdict import Analysis, Analyzer, Lesson, Scanner, Verdict, unanalyzed
from pochta.cpupool import CpuPool
from pochta.errors import CpuPoolError, CpuPoolProcessDied, CpuPoolTimeout, Overloaded, PochtaError
from pochta.executors import run_in
from pochta.mailbox.prepare import Prepared, prepare, unprepared
from pochta.mailbox.trace import without_claims
from pochta.mime import normalize
from pochta.mime.letter import parse
from pochta.mime.split import Split
from pochta.types import Activity, Envelope, Held

if TYPE_CHECKING:
    from pochta.antispam.model.booster import Model

log = logging.getLogger("pochta.intake")
T = TypeVar("T")

SMALL = 512 << 10  # bytes: a letter this small is taken by a worker before bigger ones
POOL_MODULES = ("pochta.mailbox.intake", "pochta.mailbox.deciding", "pochta.mailbox.warmed")
"""What a worker process runs: imported once by the fork server (``CpuPool(preload=)``),
so that each worker starts with them already imported (``warmed``: and with the tables every
letter reads already built)."""


@dataclass(frozen=True)
class AnalysisSettings:
    """What every process's analyzer is built from (picklable: it is a worker's one
    initializer argument). ``dns = "system"``: SPF/DKIM/DMARC through dnspython, asking
    ``dns_server`` ("address[:port]") or, unset, the host's resolvers; ``word_key``: the
    installation's key of the learned words' hashes (:func:`pochta.antispam.tokens.token_hash`);
    ``forwarders``: ``antispam.trusted_forwarders`` (:mod:`pochta.antispam.signs.forwarders`)."""

    dns: str = "off"
    budget: float | None = None
    tokens: TokenTable | None = None
    dns_server: str | None = None
    dns_timeout: float = 2.0
    dns_lifetime: float = 7.0
    word_key: bytes = dataclasses.field(default=b"", repr=False)  # a secret: never shown
    forwarders: tuple[str, ...] = ()  # antispam.trusted_forwarders


def make_analyzer(settings: AnalysisSettings, *, deferred: bool = False) -> Analyzer:
    """The analysis half of the verdict. ``deferred`` (the workers, and the server's intake):
    SPF/DKIM/DMARC are left to the server's :class:`Authenticator`, no DNS is asked here;
    otherwise (``pochta scan``) they are checked here, with blocking DNS."""
    resolver = None
    if settings.dns == "system" and not deferred:
        servers = [settings.dns_server] if settings.dns_server else None
        resolver = DnsResolver(timeout=settings.dns_timeout, nameservers=servers)
    return Analyzer(
        resolver=resolver,
        budget=settings.budget,
        tokens=settings.tokens,
        dns_lifetime=settings.dns_lifetime,
        word_key=settings.word_key,
        plan_auth=deferred and settings.dns == "system",
        forwarders=Forwarders.parse(settings.forwarders),
    )


# -- in a worker process -------------------------------------------------------------------
_analyzer: Analyzer | None = None
_scanner: Scanner | None = None

Decider = Callable[[], Scanner]
"""Builds a worker process's own decision half (``deciding.worker_scanner``: its own connections
to the shingles' counters and the learned words, the rules, the model); picklable."""


def init_pool_process(settings: AnalysisSettings, decider: Decider | None = None) -> None:
    """The pool's initializer: build this process's analyzer and load what it reads (the
    protected organizations, the public suffix list, the format characters' tables) before
    the first letter; with ``decider``, its scanner too, which decides letters' verdicts here
    and counts them, with the shipped words keyed as its store keys them. What a letter
    would build the first time it needs it costs each new worker ~0.25 s here, at start,
    instead of in the first letters' time (one connection's letters wait for them in turn)."""
    global _analyzer, _scanner
    _analyzer = make_analyzer(settings, deferred=True)
    _analyzer.analyze(parse(b"From: a@example.org\r\nSubject: warm\r\n\r\nhttp://example.org/\r\n"))
    normalize.warm()
    if decider is not None:
        _scanner = decider()
        if _scanner.words is not None:
            _scanner.words.warm()


def close_pool_process() -> None:
    """The pool's finalizer: what this process's counters and learned words buffered is
    written before it exits (a worker killed at its deadline loses it: at most the
    counters' ``flush_interval`` of increments, as a crash does)."""
    global _scanner
    scanner, _scanner = _scanner, None
    if scanner is None:
        return
    if scanner.counters is not None:
        scanner.counters.close()
    if scanner.words is not None:
        scanner.words.close()


def _decided(analysis: Analysis | None) -> tuple[Analysis | None, Verdict | None]:
    """The analysis (with the decision's CPU) and its verdict, when this process decides and
    nothing is left to the server first (sender authentication: ``Analysis.plan``)."""
    if _scanner is None or analysis is None or analysis.plan is not None:
        return analysis, None
    return _scanner.judge(analysis)


def learn_in_pool(lesson: Lesson) -> None:
    """A delivered letter's shingles counted (and its words taught) in this process."""
    if _scanner is None:
        raise RuntimeError("the worker process has no scanner")
    _scanner.teach(lesson)


def _worker_analyzer() -> Analyzer:
    if _analyzer is None:  # a pool started without init_pool_process
        raise RuntimeError("the worker process was not initialized")
    return _analyzer


RawLetter = bytes | Path
"""A letter as the intake takes it: its bytes, or a file holding them (read where it is used)."""


def load(letter: RawLetter, prefix: bytes = b"", authserv_id: str | None = None) -> bytes:
    """``prefix`` and the letter's bytes; with ``authserv_id``, the letter without the header
    fields that claim to be pochta's (:func:`pochta.mailbox.trace.without_claims`)."""
    if isinstance(letter, Path):
        with letter.open("rb") as f:
            raw = f.read()
    else:
        raw = letter
    if authserv_id is not None:
        raw, removed = without_claims(raw, authserv_id)
        if removed:
            log.info("removed %d header field(s) that claimed to be pochta's", removed)
    return prefix + raw


def size_of(letter: RawLetter) -> int:
    return letter.stat().st_size if isinstance(letter, Path) else len(letter)


def prepare_in_pool(
    raw: RawLetter,
    envelope: Envelope | None,
    helo: str | None,
    inline_limit: int,
    analyze: bool,
    shingles: bool,
    prefix: bytes = b"",
    authserv_id: str | None = None,
    decide: bool = False,
) -> Prepared:
    """``decide``: the verdict decided here too, when this process can (see ``_decided``)."""
    analyzer = _worker_analyzer() if analyze else None
    prepared = prepare(
        load(raw, prefix, authserv_id),
        envelope,
        helo,
        inline_limit=inline_limit,
        analyzer=analyzer,
        shingles=shingles,
    )
    if decide:
        analysis, verdict = _decided(prepared.analysis)
        prepared = dataclasses.replace(prepared, analysis=analysis, verdict=verdict)
    if log.isEnabledFor(logging.DEBUG):
        _log_prepared(prepared)
    if prepared.verdict is not None:
        prepared = for_the_server(prepared, _scanner.model if _scanner is not None else None)
    return prepared


def for_the_server(prepared: Prepared, model_: Model | None) -> Prepared:
    """A letter its worker decided, as the server process uses it: the worker's answer,
    pickled back to the server (for a corpus letter of ~3.8 KB, ~10 KB rather than ~18.6 KB:
    reading it took ~10 % of the server's GIL time). The server records the verdict (the
    analysis's CPU: ``seconds``), groups the recipients by their own verdicts
    (``Scanner.for_owner``: the analysis's ``tokens`` and ``hashes``, and the verdict's
    features as ``model_`` reads them), puts the verdict's header lines in front (label,
    scores, rules, authentication, ``partial``) and hands its lesson back to a worker (the
    shingles' refs). So the analysis keeps only ``auth``, ``partial``, ``seconds``,
    ``tokens`` and ``hashes``; the verdict's features only the model's columns whose value
    is not the one the model takes for a missing column (none without a model); the
    shingles travel once, as the refs their counters take, packed in plain numbers
    (``Prepared.refs``: unpickling ~25 frozen dataclasses cost the server more than the
    rest of the answer). The verdict's features, the tokens and their hashes, which the
    server reads only for a recipient whose own words count (or verdicts that teach the
    words), travel packed, one string or bytes object each (:mod:`pochta.antispam.packed`:
    made into a dict or tuple when first read): the answer's reading ~120 -> ~55 us a letter.
    What the server stores, counts, logs and answers is the same."""
    analysis, verdict = prepared.analysis, prepared.verdict
    if analysis is None or verdict is None:
        return prepared
    hashes = packed.hashes(analysis.hashes)
    slim = Analysis(
        (),
        analysis.auth,
        {},
        (),
        analysis.partial,
        analysis.seconds,
        tokens=packed.tokens(analysis.tokens),
        hashes=hashes,
    )
    return dataclasses.replace(
        prepared,
        analysis=slim,
        shingles=(),
        verdict=dataclasses.replace(
            verdict,
            features=packed.row(_model_reads(verdict.features, model_)),
            shingles=[],
            hashes=hashes if verdict.hashes is analysis.hashes else packed.hashes(verdict.hashes),
        ),
        refs=pack(update_refs(verdict.shingles)),
    )


def _model_reads(features: Mapping[str, float], model_: Model | None) -> dict[str, float]:
    """The features ``model_.row`` reads differently from a missing column's, as the float
    it reads (``float(v)``: an int, e.g. ``rules.phishing_score`` of a letter no phishing
    rule scored, ``round(0, 6)``, would keep :func:`packed.row` from packing the row)."""
    if model_ is None:
        return {}
    get = features.get
    kept = {}
    for c, missing in model_.missing_values:  # (x != x: x is NaN)
        v = get(c)
        if v is None or v == missing or (v != v and missing != missing):
            continue
        kept[c] = float(v)
    return kept


def _log_prepared(prepared: Prepared) -> None:
    a = prepared.analysis
    cpu = ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in a.seconds.items()) if a else "-"
    log.debug(
        "prepared %d bytes: %d part(s) split off, %d shingle(s), analysis CPU: %s%s",
        prepared.size,
        len(prepared.split.parts),
        len(prepared.shingles),
        cpu,
        f", partial: {','.join(a.partial)}" if a is not None and a.partial else "",
    )


Spilled = dict[int, Path]
"""Extracted parts (by index) written to files instead of being returned (content ``b""``)."""


def spill_path(directory: Path, index: int) -> Path:
    return directory / f"{index}.part"


def spill(prepared: Prepared, directory: Path, over: int) -> tuple[Prepared, Spilled]:
    """The extracted parts written each to its own private file (mode 0600) in
    ``directory`` (made, mode 0700, when the first is written: the caller removes it) and
    taken out of ``prepared``, but for the first ones that together stay within ``over``
    bytes; the files by part index. Nothing is left behind when writing fails."""
    files: Spilled = {}
    parts = []
    kept = 0
    try:
        for part in prepared.split.parts:
            if kept + part.size <= over:
                kept += part.size
            else:
                if not files:
                    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
                path = spill_path(directory, part.index)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                files[part.index] = path
                with open(fd, "wb") as f:
                    f.write(part.content)
                part = dataclasses.replace(part, content=b"")
            parts.append(part)
    except BaseException:
        for path in files.values():
            path.unlink(missing_ok=True)
        raise
    split = Split(prepared.split.skeleton, tuple(parts))
    return dataclasses.replace(prepared, split=split), files


def prepare_apart_in_pool(
    raw: RawLetter, inline_limit: int, directory: Path, over: int
) -> tuple[Prepared, Spilled]:
    """A letter a user gives (no analysis, no shingles), its big parts spilled."""
    prepared = prepare(load(raw), inline_limit=inline_limit)
    return spill(prepared, directory, over)


def analyze_in_pool(
    raw: bytes, envelope: Envelope | None, helo: str | None, decide: bool = False
) -> tuple[Analysis, Verdict | None]:
    analysis = _worker_analyzer().analyze(parse(raw), envelope, helo)
    if not decide:
        return analysis, None
    decided, verdict = _decided(analysis)
    assert decided is not None
    return decided, verdict


@dataclass(frozen=True)
class Scanned:
    """A scan (``POST /v1/scan``) its worker decided whole: the answer as the API sends it
    (``body``: the verdict's JSON), and what the server's
    metrics take of it (``Scanner.record``: the label, whether it is partial, the CPU of the
    analysis and the decision). The server reads ~0.2 KB back instead of the analysis and the
    verdict (~18 KB for a corpus letter: their features, shingles, tokens and hashes), and
    neither decodes nor encodes the verdict."""

    body: bytes
    label: str
    partial: bool
    seconds: float


def scan_json(result: dict[str, Any]) -> bytes:
    """``result`` as the API's JSON answers are written (Starlette's ``JSONResponse``: UTF-8,
    no ASCII escapes, no NaN, no blanks), byte for byte."""
    return json.dumps(
        result, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")


def scan_answer(scanner: Scanner, verdict: Verdict, authserv_id: str, explain: bool) -> bytes:
    """The JSON of ``POST /v1/scan`` for ``verdict`` (``explain``: and what pushed it most,
    which needs the model's booster: the server's scanner, not a worker's)."""
    result: dict[str, Any] = verdict.as_dict(authserv_id)
    if explain:
        result["explanation"] = [r.as_dict() for r in scanner.explain(verdict)]
    return scan_json(result)


def scan_in_pool(
    raw: bytes, envelope: Envelope | None, helo: str | None, authserv_id: str
) -> Scanned | Analysis:
    """A scan in a worker that decides: parsed, analyzed, decided and answered here
    (:class:`Scanned`); the analysis alone when the server must finish it (``_decided``)."""
    analysis, verdict = _decided(_worker_analyzer().analyze(parse(raw), envelope, helo))
    assert analysis is not None
    if verdict is None or _scanner is None:
        return analysis
    return Scanned(
        scan_answer(_scanner, verdict, authserv_id, False),
        verdict.label,
        bool(verdict.partial),
        sum(analysis.seconds.values()),
    )


def verify_in_pool(
    raw: RawLetter,
    prefix: bytes,
    steps: Sequence[DkimStep],
    keys: Keys,
    authserv_id: str | None = None,
) -> tuple[DkimResult, ...]:
    """The DKIM signatures of ``prefix + raw`` verified with the keys the server found (the
    letter as its first pass read it: without the fields that claim to be pochta's)."""
    return finish_dkim(load(raw, prefix, authserv_id), steps, keys)


# -- in the server -------------------------------------------------------------------------
class Intake:
    """Prepares and analyzes letters in ``pool`` (None: in a thread of ``local``, with
    ``analyzer``); ``auth``: authenticates them (None: ``antispam.dns = "off"``); ``local``:
    the pool for reading files and analysis without workers (None: the loop's default).
    ``authserv_id``: pochta's name in Authentication-Results; a letter prepared for delivery
    loses the fields that claim it (and every ``X-Pochta-*`` field) before it is parsed.
    ``on_timeout``: what a letter to be scored that its worker could not finish does (see
    the module); each such letter is counted in /metrics and told to ``activity``."""

    def __init__(
        self,
        analyzer: Analyzer,
        pool: CpuPool | None,
        *,
        inline_limit: int,
        deadline: float,
        authserv_id: str,
        on_timeout: str = "inbox",
        activity: Activity | None = None,
        auth: Authenticator | None = None,
        local: Executor | None = None,
        decides: bool = False,
    ) -> None:
        self.analyzer = analyzer
        self.decides = decides and pool is not None  # the pool's workers have a scanner
        self._lessons: set[Future[None]] = set()  # handed to the workers, not yet counted
        self._lock = threading.Lock()
        self.on_timeout = on_timeout
        self.activity = activity
        self.pool = pool
        self.inline_limit = inline_limit
        self.deadline = deadline
        self.authserv_id = authserv_id
        self.auth = auth
        self.local = local

    def start(self) -> None:
        if self.pool is not None:
            self.pool.start()

    def close(self) -> None:
        """The lessons handed to the workers are counted first (within the deadline), then
        the workers stop and write what their counters buffered."""
        with self._lock:
            lessons = list(self._lessons)
        wait(lessons, timeout=self.deadline)
        if self.pool is not None:
            self.pool.close()

    def _job(
        self,
        raw: RawLetter,
        envelope: Envelope | None,
        helo: str | None,
        analyze: bool,
        shingles: bool,
        prefix: bytes,
    ) -> tuple[Any, ...]:
        """The arguments of ``prepare_in_pool`` for this letter (both ways to a worker)."""
        return (
            raw,
            envelope,
            helo,
            self.inline_limit,
            analyze,
            shingles,
            prefix,
            self.authserv_id,
            analyze and self.decides,
        )

    async def prepare(
        self,
        raw: RawLetter,
        envelope: Envelope | None,
        helo: str | None,
        *,
        analyze: bool,
        shingles: bool,
        prefix: bytes = b"",
        held: Held | None = None,
    ) -> Prepared:
        """``prefix + raw`` (``raw`` without the fields that claim to be pochta's) parsed,
        analyzed (``analyze``: and authenticated) or only shingled (``shingles``), split.
        ``raw`` may be a file (read by the worker). Past the deadline: kept whole and
        unscored, as ``on_timeout`` says, its bytes taken into ``held`` first (Overloaded
        when the budget cannot hold them; see the module). CpuPoolUnavailable when the queue
        is full."""
        auth = self._begin(envelope, helo) if analyze else None
        try:
            prepared = await self._prepare(
                raw, envelope, helo, analyze=analyze, shingles=shingles, prefix=prefix, held=held
            )
            if auth is not None and prepared.analysis is not None:
                analysis = await self._authenticate(auth, prepared.analysis, raw, prefix)
                prepared = dataclasses.replace(prepared, analysis=analysis)
            return prepared
        finally:
            if auth is not None:
                auth.close()

    def _begins_auth(self, envelope: Envelope | None) -> bool:
        """Whether a letter of ``envelope`` is authenticated (in the server, see the module)."""
        return self.auth is not None and envelope is not None and bool(envelope.ip)

    def _begin(self, envelope: Envelope | None, helo: str | None) -> LetterAuth | None:
        """SPF starts as the letter comes in (as ``Analyzer.analyze`` would check it)."""
        if self.auth is None or envelope is None or not envelope.ip:
            return None
        return self.auth.begin(envelope.ip, envelope.sender or "", helo or "")

    async def _authenticate(
        self, auth: LetterAuth, analysis: Analysis, raw: RawLetter, prefix: bytes
    ) -> Analysis:
        if analysis.plan is None:  # not analyzed, or the budget cut it before authentication
            return analysis

        async def verify(steps: tuple[DkimStep, ...], keys: Keys) -> tuple[DkimResult, ...]:
            return await self._verify(raw, prefix, steps, keys)

        try:
            return analysis.authenticated(await auth.finish(analysis.plan, verify))
        except Exception:  # a fault in a check must not cost the letter its delivery
            log.exception("sender authentication failed; the verdict goes without it")
            partial = (*analysis.partial, "auth")
            return dataclasses.replace(analysis, plan=None, partial=partial)

    async def _verify(
        self, raw: RawLetter, prefix: bytes, steps: tuple[DkimStep, ...], keys: Keys
    ) -> tuple[DkimResult, ...]:
        """DKIM signatures verified in a worker (a short task; a small letter's is taken
        before big letters, as its first pass was); one that could not run leaves them
        ``temperror``."""
        if self.pool is None:
            return await run_in(
                self.local, verify_in_pool, raw, prefix, steps, keys, self.authserv_id
            )
        try:
            return await self.pool.arun(
                verify_in_pool,
                raw,
                prefix,
                steps,
                dict(keys),
                self.authserv_id,
                deadline=self.deadline,
                urgent=len(prefix) + size_of(raw) <= SMALL,
            )
        except CpuPoolError as exc:
            log.warning("DKIM signatures not verified: %s", exc.message)
            return unverified(steps, keys, exc.message)

    async def _prepare(
        self,
        raw: RawLetter,
        envelope: Envelope | None,
        helo: str | None,
        *,
        analyze: bool,
        shingles: bool,
        prefix: bytes = b"",
        held: Held | None = None,
    ) -> Prepared:
        if self.pool is None:
            analyzer = self.analyzer if analyze else None
            return await run_in(
                self.local,
                lambda: prepare(
                    load(raw, prefix, self.authserv_id),
                    envelope,
                    helo,
                    inline_limit=self.inline_limit,
                    analyzer=analyzer,
                    shingles=shingles,
                ),
            )
        args = self._job(raw, envelope, helo, analyze, shingles, prefix)
        try:
            return await self.pool.arun(
                prepare_in_pool,
                *args,
                deadline=self.deadline,
                urgent=len(prefix) + size_of(raw) <= SMALL,
            )
        except (CpuPoolTimeout, CpuPoolProcessDied) as exc:
            return await self._unprepared(exc, raw, prefix, analyze=analyze, held=held)

    async def _unprepared(
        self,
        exc: CpuPoolTimeout | CpuPoolProcessDied,
        raw: RawLetter,
        prefix: bytes,
        *,
        analyze: bool,
        held: Held | None,
    ) -> Prepared:
        """A letter no worker could prepare: kept whole and unscored, or refused (``exc``
        raised again, or Overloaded), as ``on_timeout`` says (see the module)."""
        size = len(prefix) + size_of(raw)
        refusal: PochtaError = exc
        whole = None
        if not analyze or self.on_timeout != "defer":
            try:
                whole = await self._whole(raw, prefix, self.authserv_id, held, exc)
            except Overloaded as overloaded:  # deferred after all: the sender retries
                refusal = overloaded
        if analyze:
            action = self.on_timeout if whole is not None else "defer"
            metrics.unscored("timeout" if isinstance(exc, CpuPoolTimeout) else "died", action)
            if self.activity is not None:
                self.activity.unscored(action)
        if whole is None:
            log.warning("a letter of %d bytes is deferred unscored: %s", size, exc.message)
            if refusal is exc:
                raise exc
            raise refusal from exc
        log.warning("a letter of %d bytes is stored unscored: %s", size, exc.message)
        return unprepared(whole, unanalyzed() if analyze else None)

    async def prepare_then(
        self,
        then: Callable[[Prepared], T],
        executor: Executor | None,
        raw: RawLetter,
        envelope: Envelope | None,
        helo: str | None,
        *,
        analyze: bool,
        shingles: bool,
        prefix: bytes = b"",
        held: Held | None = None,
    ) -> T:
        """``then`` (storing it) called in a thread of ``executor`` with the letter
        :meth:`prepare` gives. When nothing between the two needs the server's loop (a pool,
        an executor, no sender authentication to finish), the worker's answer goes from the
        pool's thread straight to ``executor``: the loop wakes once, for ``then``'s result,
        not also in between (a wake-up and a hop less per letter). A letter its worker could
        not prepare takes the way of :meth:`prepare` (``on_timeout``). Cancelled while the
        worker runs, ``then`` is not called."""
        authenticates = analyze and self._begins_auth(envelope)
        if self.pool is None or executor is None or authenticates:
            prepared = await self.prepare(
                raw, envelope, helo, analyze=analyze, shingles=shingles, prefix=prefix, held=held
            )
            return await run_in(executor, then, prepared)
        context = contextvars.copy_context()  # the log's ids, as run_in gives them
        job: Future[Prepared] = self.pool.submit(
            prepare_in_pool,
            *self._job(raw, envelope, helo, analyze, shingles, prefix),
            deadline=self.deadline,
            urgent=len(prefix) + size_of(raw) <= SMALL,
        )
        out: Future[T] = Future()

        def hand_over(job: Future[Prepared]) -> None:  # in the pool's thread
            if job.cancelled() or not out.set_running_or_notify_cancel():
                return
            exc = job.exception()
            if exc is not None:
                out.set_exception(exc)
                return
            try:
                step = executor.submit(context.run, then, job.result())
            except BaseException as exc:  # the executor is shutting down
                out.set_exception(exc)
                return
            step.add_done_callback(lambda step: _pass_on(step, out))

        out.add_done_callback(lambda out: job.cancel() if out.cancelled() else None)
        job.add_done_callback(hand_over)
        try:
            return await asyncio.wrap_future(out)
        except (CpuPoolTimeout, CpuPoolProcessDied) as exc:
            prepared = await self._unprepared(exc, raw, prefix, analyze=analyze, held=held)
            return await run_in(executor, then, prepared)

    async def _whole(
        self,
        raw: RawLetter,
        prefix: bytes,
        authserv_id: str | None,
        held: Held | None,
        why: CpuPoolError,
    ) -> bytes:
        """``prefix + raw`` read whole into the server (no worker could prepare it), its
        bytes taken into ``held`` first; Overloaded when the budget cannot hold them."""
        size = len(prefix) + size_of(raw)
        if held is not None and not held.take(size):
            raise Overloaded(
                f"a letter of {size} bytes could not be prepared ({why.message}) and the"
                " server cannot hold it whole now; try again later"
            ) from why
        return await run_in(self.local, load, raw, prefix, authserv_id)

    async def prepare_apart(
        self, raw: RawLetter, directory: Path, over: int, held: Held | None = None
    ) -> tuple[Prepared, Spilled]:
        """``raw`` parsed and split without analysis (a letter a user puts in her mailbox),
        each extracted part over ``over`` bytes written by the worker to a file in
        ``directory`` (see :func:`spill`) rather than sent back; the caller removes
        ``directory`` whatever happens (a worker killed on the way may have left files in
        it). Past the deadline the letter is stored whole, its bytes taken into ``held``
        first (Overloaded when the budget cannot hold them). In a thread (no pool) nothing
        crosses a process, and nothing is spilled."""
        if self.pool is None:
            return await self.prepare(raw, None, None, analyze=False, shingles=False), {}
        size = size_of(raw)
        try:
            return await self.pool.arun(
                prepare_apart_in_pool,
                raw,
                self.inline_limit,
                directory,
                over,
                deadline=self.deadline,
                urgent=size <= SMALL,
            )
        except (CpuPoolTimeout, CpuPoolProcessDied) as exc:
            try:
                whole = await self._whole(raw, b"", None, held, exc)
            except Overloaded:
                log.warning("a letter of %d bytes is refused for now: %s", size, exc.message)
                raise
            log.warning("a letter of %d bytes is stored whole: %s", size, exc.message)
            return unprepared(whole, None), {}

    async def analyze(
        self, raw: bytes, envelope: Envelope | None, helo: str | None
    ) -> tuple[Analysis, Verdict | None]:
        """The analysis, authenticated (the scan API), and its verdict when a worker decided
        it (None: the server decides); past the deadline, an empty analysis (partial)."""
        auth = self._begin(envelope, helo)
        try:
            analysis, verdict = await self._analyze(raw, envelope, helo)
            if auth is not None:
                analysis = await self._authenticate(auth, analysis, raw, b"")
            return analysis, verdict
        finally:
            if auth is not None:
                auth.close()

    async def _analyze(
        self, raw: bytes, envelope: Envelope | None, helo: str | None
    ) -> tuple[Analysis, Verdict | None]:
        if self.pool is None:
            analysis = await run_in(
                self.local, lambda: self.analyzer.analyze(parse(raw), envelope, helo)
            )
            return analysis, None
        try:
            return await self.pool.arun(
                analyze_in_pool,
                raw,
                envelope,
                helo,
                self.decides,
                deadline=self.deadline,
                urgent=len(raw) <= SMALL,
            )
        except (CpuPoolTimeout, CpuPoolProcessDied) as exc:
            log.warning("a letter of %d bytes is not analyzed: %s", len(raw), exc.message)
            return unanalyzed(), None

    async def scan(
        self, raw: bytes, envelope: Envelope | None, helo: str | None, explain: bool
    ) -> Scanned | tuple[Analysis, Verdict | None]:
        """``POST /v1/scan``'s work: when the workers decide and the server has nothing to
        add (no sender authentication, no ``explain``: the explanation needs the server's
        model), one worker parses, analyzes, decides and writes the answer
        (:class:`Scanned`); otherwise what :meth:`analyze` gives."""
        if self.pool is None or not self.decides or explain or self._begins_auth(envelope):
            return await self.analyze(raw, envelope, helo)
        try:
            scanned = await self.pool.arun(
                scan_in_pool,
                raw,
                envelope,
                helo,
                self.authserv_id,
                deadline=self.deadline,
                urgent=len(raw) <= SMALL,
            )
        except (CpuPoolTimeout, CpuPoolProcessDied) as exc:
            log.warning("a letter of %d bytes is not analyzed: %s", len(raw), exc.message)
            return unanalyzed(), None
        return scanned if isinstance(scanned, Scanned) else (scanned, None)

    def teach(self, lesson: Lesson) -> bool:
        """``lesson`` handed to a worker to count (``Scanner.teacher``), not waited for; False
        (the caller teaches it) when the workers do not decide or half their queue is taken:
        a lesson never takes the place of a letter."""
        if not self.decides or self.pool is None:
            return False
        stats = self.pool.stats
        if stats.pending * 2 >= self.pool.max_pending:
            return False
        try:
            done = self.pool.submit(learn_in_pool, lesson, deadline=self.deadline, urgent=True)
        except CpuPoolError:
            return False
        with self._lock:
            self._lessons.add(done)
        done.add_done_callback(self._taught)
        return True

    def _taught(self, done: Future[None]) -> None:
        with self._lock:
            self._lessons.discard(done)
        exc = None if done.cancelled() else done.exception()
        if exc is not None:
            log.warning("one letter's shingle counts dropped: %s", exc)


def _pass_on(step: Future[T], out: Future[T]) -> None:
    """``step``'s outcome given to ``out`` (running: its caller no longer cancels it)."""
    if step.cancelled():
        out.set_exception(CancelledError())
    elif (exc := step.exception()) is not None:
        out.set_exception(exc)
    else:
        out.set_result(step.result())
