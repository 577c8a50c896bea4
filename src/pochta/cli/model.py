"""``pochta model``: train a new version on the installation's own mail, evaluate letters, list,
promote and roll back versions. Training is the model factory's (:mod:`pochta_factory`), loaded
inside ``train`` only: the runtime never imports it."""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import Progress

from pochta.antispam import personal
from pochta.antispam.model import store as store_mod
from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, opened, out
from pochta.cli.message import find_user
from pochta.errors import InvalidInput
from pochta.mailbox.prepare import MAX_ADDRESS
from pochta.mime import normalize
from pochta.mime.letter import parse
from pochta.types import User

if TYPE_CHECKING:
    from pochta.app import Pochta

app = typer.Typer(
    help="The spam model: train a new version on your own mail, check it, promote it, roll "
    "it back.",
    no_args_is_help=True,
)

MAX_EVALUATE = 100_000  # letters one `pochta model evaluate` reads at most
REASONS = 3  # reasons printed per letter


@contextmanager
def _bar(json_output: bool) -> Iterator[Callable[[int], None] | None]:
    """A progress callback (a bar on a terminal), or None."""
    if json_output or not sys.stderr.isatty():
        yield None
        return
    with Progress(transient=True) as bar:
        task = bar.add_task("letters", total=None)
        yield lambda n: bar.advance(task, n)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f} %"


def _show_figures(figures: dict[str, Any]) -> None:
    letters = figures["letters"]
    out.print(
        f"{figures['folds']}-fold cross-validated, on {letters['spam']} spam and "
        f"{letters['ham']} ham letters:"
    )
    out.print(f"  {'':6} {'spam caught':>12} {'ham in Spam':>12}")
    for who in ("new", "live"):
        if who in figures:
            f = figures[who]
            out.print(f"  {who:6} {_pct(f['spam_caught']):>12} {_pct(f['ham_in_spam']):>12}")


@app.command()
@handles_errors
def train(
    ham: Annotated[
        list[Path] | None,
        typer.Option(help="ham: a Maildir, an mbox, a directory of .eml/.txt files, a letter"),
    ] = None,
    spam: Annotated[list[Path] | None, typer.Option(help="spam: the same kinds of paths")] = None,
    from_installation: Annotated[
        bool,
        typer.Option(
            "--from-installation",
            help="also the letters users keep: in Spam = spam, elsewhere = ham, by pochta's "
            "stored verdict (moved in and out of Spam: the corrections)",
        ),
    ] = False,
    promote: Annotated[
        bool,
        typer.Option(
            "--promote", help="make the new version live at once if its figures are not worse"
        ),
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option(help="write model.cbm + model.json here instead of a new version"),
    ] = None,
    iterations: Annotated[
        int, typer.Option(min=10, max=5000, help="CatBoost boosting rounds")
    ] = 400,
    generated: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=100_000,
            help="legitimate commercial letters pochta generates and adds to the training "
            "ham, with 1 short personal letter per 6 beside them (0: none; default 1800)",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="CatBoost's random seed")] = 0,
    models: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=16,  # fitting.MAX_MODELS (not imported here: the factory is not the runtime)
            help="fits averaged into the model, with seeds SEED, SEED+1... (each costs its "
            "training time again and its trees on every letter; default 1)",
        ),
    ] = None,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Train a new model version. With --ham/--spam/--from-installation on those letters;
    without, on the public SpamAssassin corpus (easy-ham-1 + spam-1, downloaded into the
    cache on first use), as the shipped model was. Prints the new model's k-fold
    cross-validated figures next to the live model's on the same letters BEFORE anything is
    replaced, then writes a new version (not live until `pochta model promote`)."""
    # the model factory is imported here only: the runtime never loads it
    from pochta_factory import installation, legit, sources, training

    count = legit.COUNT if generated is None else generated
    with opened(data, config) as pochta:
        chosen = None
        read: dict[str, Any] = {}
        max_size = pochta.settings.smtp.max_message_size
        if ham or spam or from_installation:
            hams = sources.read(ham or [], "ham", max_size=max_size)
            spams = sources.read(spam or [], "spam", max_size=max_size)
            read = {"ham": hams.as_dict(), "spam": spams.as_dict()}
            letters = hams.letters + spams.letters
            if from_installation:
                found = installation.read(pochta.mailbox)
                read["installation"] = found.as_dict()
                letters += found.ham.letters + found.spam.letters
            _enough(letters)
            chosen = letters
        live = pochta.scanner.model
        live_version = pochta.live_model.version if pochta.live_model is not None else None
        with _bar(json_output) as progress:
            model, info = training.train(
                chosen,
                generated=count,
                iterations=iterations,
                seed=seed,
                models=training.MODELS if models is None else models,
                progress=progress,
                live=live,
                lofo=chosen is None,
            )
        figures = {**info["figures"], "live_version": live_version, "read": read}
        if not json_output:
            for kind, r in read.items():
                out.print(f"read {kind}: {r}", markup=False)
            _show_figures(figures)
        payload: dict[str, Any] = {"figures": figures, "threshold": info["threshold"]}
        if output is not None:
            model.save(output)
            payload["saved_to"] = str(output)
        else:
            now = time.time()
            version = _free_version(pochta.models, now)
            pochta.models.put(version, store_mod.files_of(model, figures), created=now)
            payload["version"] = version
            if promote:
                better = training.not_worse(figures)
                if better:
                    pochta.models.promote(version)
                payload["promoted"] = better
    emit(json_output, payload, lambda: _said_trained(payload))


def _said_trained(payload: dict[str, Any]) -> None:
    if "saved_to" in payload:
        out.print(f"saved to {payload['saved_to']}", markup=False)
        return
    version = payload["version"]
    out.print(f"new model version {version} (threshold {payload['threshold']:.3f})")
    if payload.get("promoted") is True:
        out.print(f"promoted: {version} is live; every loader switches within a few seconds")
    elif payload.get("promoted") is False:
        out.print(f"NOT promoted: worse than the live model; `pochta model promote {version}`")
    else:
        out.print(f"not live: `pochta model promote {version}` makes it live")


def _enough(letters: list[Any]) -> None:
    kinds = Counter(m.label for m in letters)
    for kind in ("ham", "spam"):
        if kinds[kind] < MIN_PER_KIND:
            raise InvalidInput(
                f"{kinds[kind]} {kind} letter(s): training needs at least {MIN_PER_KIND} of "
                "each kind (the cross-validation cuts them into 5 folds)"
            )


MIN_PER_KIND = 20


def _free_version(models: store_mod.ModelStore, now: float) -> str:
    base = store_mod.new_version(now)
    taken = {v for v, _ in models.versions()}
    version, n = base, 1
    while version in taken:
        n += 1
        version = f"{base}.{n}"
    return version


@app.command("list")
@handles_errors
def list_(data: DataOpt = None, config: ConfigOpt = None, json_output: JsonOpt = False) -> None:
    """The model versions, oldest first, with their figures; the live one marked."""
    with opened(data, config) as pochta:
        rows = store_mod.listing(pochta.models)
    payload = {"live": next((r["version"] for r in rows if r["live"]), None), "versions": rows}

    def human() -> None:
        if not rows:
            out.print("no model versions: the shipped model is live")
        for r in rows:
            mark = "*" if r["live"] else " "
            when = datetime.fromtimestamp(r["created"], UTC).strftime("%Y-%m-%d %H:%M")
            f = r["figures"].get("new", {})
            out.print(
                f"{mark} {r['version']:<20} {when}  spam caught "
                f"{_pct(f.get('spam_caught'))}  ham in Spam {_pct(f.get('ham_in_spam'))}"
            )
        if rows and payload["live"] is None:
            out.print("(the shipped model is live)")

    emit(json_output, payload, human)


@app.command("promote")
@handles_errors
def promote_(
    version: Annotated[str, typer.Argument(help="the version (`pochta model list`)")],
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Make a version live: every loader switches within antispam.model_check_seconds."""
    with opened(data, config) as pochta:
        store_mod.check_version(version)
        store_mod.model_of(pochta.models.files(version))  # it loads, before it is live
        pochta.models.promote(version)
    emit(json_output, {"live": version}, lambda: out.print(f"{version} is live"))


@app.command()
@handles_errors
def rollback(data: DataOpt = None, config: ConfigOpt = None, json_output: JsonOpt = False) -> None:
    """Undo the last promotion: the version live before it is live again (past the first,
    the shipped model). Every version is kept."""
    with opened(data, config) as pochta:
        now = pochta.models.rollback()
    emit(
        json_output,
        {"live": now},
        lambda: out.print(f"{now or 'the shipped model'} is live"),
    )


@app.command()
@handles_errors
def evaluate(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="letters: Maildir, mbox, directories of .eml/.txt, files"),
    ] = None,
    user: Annotated[
        str | None, typer.Option("--user", help="a user's letters instead, in every folder")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=MAX_EVALUATE, help="letters at most")] = 1000,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """For every letter: would it go to Spam now, and why (the reasons that pushed the live
    model most, or the rules' points); then a summary. With --user, for that user: the
    verdict made personal by the user's own words and sender list, as a delivery would.
    Nothing is stored or learned."""
    if bool(paths) == (user is not None):
        raise InvalidInput("give letters (PATH...) or --user EMAIL, not both nor neither")
    with opened(data, config) as pochta:
        owner = find_user(pochta.mailbox, user) if user is not None else None
        rows = [
            _judged(pochta, name, where, raw, owner)
            for name, where, raw in _letters(pochta, paths or [], owner, limit)
        ]
    summary = _summary(rows)
    payload = {"letters": rows, "summary": summary}

    def human() -> None:
        for r in rows:
            now = f"  (now in {r['folder']})" if r["folder"] else ""
            listed = f"  (list: {r['list']})" if r["list"] else ""
            out.print(f"{r['goes_to']:5} {r['verdict']:8} {r['name']}{now}{listed}", markup=False)
            for reason in r["reasons"]:
                out.print(f"        {reason}", markup=False, soft_wrap=True)
        out.print(
            f"{summary['letters']} letter(s): {summary['to_spam']} to Spam, "
            f"{summary['to_inbox']} to the Inbox; too large: {summary['too_large']}"
            + (f"; would change folder: {summary['would_move']}" if user else "")
        )

    emit(json_output, payload, human)


def _letters(
    pochta: Pochta, paths: list[Path], owner: User | None, limit: int
) -> Iterator[tuple[str, str | None, bytes | None]]:
    """(name, its folder now or None, the bytes or None when too large), at most ``limit``."""
    count = 0
    if owner is not None:
        for folder in pochta.mailbox.folders(owner.id):
            cursor = None
            while True:
                page = pochta.mailbox.letters(owner.id, folder.name, 200, cursor)
                for stored in page:
                    if count >= limit:
                        return
                    count += 1
                    raw = pochta.mailbox.raw(owner.id, stored.id)
                    yield f"{stored.id} {stored.subject[:60]}", stored.folder, raw
                if len(page) < 200:
                    break
                cursor = page[-1].id
        return
    from pochta_factory import sources  # reading Maildir / mbox / directories: the factory's

    for path in paths:
        for name, f in sources.raw_files(path):
            if count >= limit:
                return
            count += 1
            yield name, None, sources.bounded(f, pochta.settings.smtp.max_message_size)


def _judged(
    pochta: Pochta, name: str, folder: str | None, raw: bytes | None, owner: User | None = None
) -> dict[str, Any]:
    """One letter's row; for ``owner``, the verdict a delivery to that user would give."""
    if raw is None:
        return {"name": name, "folder": folder, "goes_to": "-", "verdict": "too_large",
                "probability": None, "list": None, "reasons": []}  # fmt: skip
    started = time.monotonic()
    letter = parse(raw)
    analysis = pochta.scanner.analyzer.analyze(letter, started=started)
    verdict = pochta.scanner.decide(analysis)
    if owner is not None:
        sender = normalize.address(letter.from_address[:MAX_ADDRESS]) or ""
        verdict = pochta.mailbox.verdict_for(owner, verdict, sender, analysis)
    reasons = pochta.scanner.explain(verdict, REASONS)
    return {
        "name": name,
        "folder": folder,
        "goes_to": "Inbox" if verdict.label == "ham" else "Spam",
        "verdict": verdict.label,
        "probability": verdict.probability,
        "list": personal.action_of(verdict),
        "reasons": [f"{r.push:+.2f} toward {r.toward}: {r.en}" for r in reasons],
    }


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    moved = sum(
        1
        for r in rows
        if r["folder"] is not None
        and r["goes_to"] != "-"
        and (r["folder"] == "Spam") != (r["goes_to"] == "Spam")
    )
    return {
        "letters": len(rows),
        "to_spam": sum(1 for r in rows if r["goes_to"] == "Spam"),
        "to_inbox": sum(1 for r in rows if r["goes_to"] == "Inbox"),
        "too_large": sum(1 for r in rows if r["goes_to"] == "-"),
        "by_verdict": dict(Counter(r["verdict"] for r in rows)),
        "would_move": moved,
    }
