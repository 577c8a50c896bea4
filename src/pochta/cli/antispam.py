"""``pochta scan``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from pochta.antispam.verdict import Verdict
from pochta.cli.common import ConfigOpt, DataOpt, JsonOpt, emit, handles_errors, opened, out
from pochta.errors import InvalidInput
from pochta.types import Envelope


@handles_errors
def scan(
    file: Annotated[Path, typer.Argument(help="a letter (RFC 5322 file); '-' = stdin")],
    ip: Annotated[str | None, typer.Option(help="the sending client's IP")] = None,
    mail_from: Annotated[
        str | None, typer.Option("--mail-from", help="the envelope sender")
    ] = None,
    helo: Annotated[str | None, typer.Option(help="the client's HELO name")] = None,
    explain: Annotated[
        bool,
        typer.Option(
            "--explain", help="also list the features that pushed the verdict most, in words"
        ),
    ] = False,
    data: DataOpt = None,
    config: ConfigOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Score a letter: verdict, probability, score, rule hits, phishing signs (with their
    explanations), Authentication-Results; with --explain, the five features that pushed the
    verdict most (the model's SHAP values, or the rules' points when the rules decided).
    Nothing is stored or counted."""
    if str(file) == "-":
        raw = sys.stdin.buffer.read()
    elif file.is_file():
        raw = file.read_bytes()
    else:
        raise InvalidInput(f"{file} is not a readable file")
    with opened(data, config) as pochta:
        envelope = Envelope(ip=ip, sender=mail_from) if ip or mail_from else None
        verdict = pochta.scanner.scan(raw, envelope, helo)
        payload = verdict.as_dict(pochta.scanner.authserv_id)
        if explain:
            payload["explanation"] = [r.as_dict() for r in pochta.scanner.explain(verdict)]
    emit(json_output, payload, lambda: _show(verdict, payload))


def _show(v: Verdict, payload: dict[str, Any]) -> None:
    colour = {"ham": "green", "spam": "yellow", "phishing": "bold red"}[v.label]
    prob = "-" if v.probability is None else f"{v.probability:.3f}"
    out.print(f"verdict      [{colour}]{v.label}[/]   probability {prob}   score {v.score:.2f}")
    for hit in v.hits:
        out.print(f"  {hit.score:+6.2f}  {hit.symbol}  {hit.description}", markup=False)
    for sign in v.signs:
        out.print(f"  sign  {sign.symbol}: {sign.explanation_en}", markup=False)
        out.print(f"        {sign.explanation_ru}", markup=False)
    out.print(f"Authentication-Results: {payload['authentication_results']}", markup=False)
    if "explanation" in payload:
        out.print("why (largest pushes first):")
        for r in payload["explanation"]:
            unit = "pts" if r["unit"] == "points" else ""
            line = f"  {r['push']:+6.2f}{unit} toward {r['toward']:4}  {r['en']}"
            out.print(line, markup=False, soft_wrap=True)
            out.print(f"  {'':>{14 + len(unit)}}  {r['ru']}", markup=False, soft_wrap=True)
