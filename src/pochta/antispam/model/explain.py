"""Why the model gave one letter its probability: the features that pushed it most, in words.

:func:`explain` takes CatBoost's SHAP values of the letter (``ShapValues``: each column's push
in log-odds, toward spam when positive, toward ham when negative; they add up to the letter's
log-odds from the model's average; the counters' columns are measured from "nothing known",
where they add nothing: :meth:`Model.contributions`) and words the largest few with
:func:`phrase`, in English and Russian. A phrase says what the feature's value was, e.g.
``shingle.14.spam_lean_24h`` = 0.8: "letters from this address in the last 24 h were mostly
spam". The unknown features get a plain "feature = value".

:func:`from_rules` does the same for a verdict the rules gave (phishing): the rules that
added the most points.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pochta.antispam.model.booster import Model
from pochta.antispam.rules.ruleset import Hit
from pochta.antispam.signs.registry import SPECS

TOP = 5


@dataclass(frozen=True, slots=True)
class Reason:
    feature: str
    value: float
    push: float  # log-odds toward spam (+) or ham (-); rules: points
    unit: str  # "log-odds" or "points"
    en: str
    ru: str

    @property
    def toward(self) -> str:
        return "spam" if self.push > 0 else "ham"

    def as_dict(self) -> dict[str, object]:
        """As JSON: a value the letter did not have (NaN to the model, which can still push
        by it) is null, as its phrase says "unknown"; JSON has no NaN."""
        return {
            "feature": self.feature,
            "value": round(self.value, 4) if math.isfinite(self.value) else None,
            "push": round(self.push, 4) if math.isfinite(self.push) else None,
            "unit": self.unit,
            "toward": self.toward,
            "en": self.en,
            "ru": self.ru,
        }


# -- the phrase table -------------------------------------------------------------------------
SHINGLE_WHAT: dict[int, tuple[str, str]] = {
    8: ("with this subject", "с такой темой"),
    10: ("with this text", "с таким текстом"),
    11: ("with nearly the same text", "с почти таким же текстом"),
    14: ("from this address", "с этого адреса"),
    15: ("from this IP address", "с этого IP-адреса"),
    16: ("from this network", "из этой сети"),
    17: ("from this domain", "с этого домена"),
    18: ("with this sender name", "с таким именем отправителя"),
    19: ("with this return-path domain", "с таким доменом обратного адреса"),
    20: ("with this Message-ID domain", "с таким доменом в Message-ID"),
    21: ("linking to these hosts", "со ссылками на эти сайты"),
    22: ("with these links", "с этими ссылками"),
    23: ("linking to these domains", "со ссылками на эти домены"),
    30: ("from this sender to these recipients", "от этого отправителя этим получателям"),
    31: ("from this sender (its distinct recipients)", "от этого отправителя (разным адресатам)"),
    32: ("from this sender through this network", "от этого отправителя через эту сеть"),
    33: ("from this sender (its distinct networks)", "от этого отправителя (из разных сетей)"),
    42: ("with an attachment of this name", "с вложением с таким именем"),
    62: ("with this very attachment", "с этим же вложением"),
}
WINDOWS: dict[str, tuple[str, str]] = {
    "1h": ("in the last hour", "за последний час"),
    "24h": ("in the last 24 h", "за последние сутки"),
    "14d": ("in the last 14 days", "за последние 14 дней"),
}
_LEAN = re.compile(r"^shingle\.(\d+)\.spam_lean_(\w+)$")
_STAT = re.compile(r"^shingle\.(\d+)\.(\w+?)_(1h|24h|14d)$")
_STATS = {  # the counters' other statistics (the rules read them; older models did too)
    "spam_ratio": ("were spam", "были спамом"),
    "ham_ratio": ("were legitimate", "были хорошими"),
    "complaint_ratio": ("drew complaints", "вызвали жалобы"),
    "unspam_ratio": ("were taken out of Spam", "были извлечены из спама"),
    "read_ratio": ("were read", "были прочитаны"),
}
_AUTH = re.compile(r"^auth\.(spf|dkim|dmarc|dmarc_policy)\.(\w+)$")

Phrase = Callable[[float], tuple[str, str]]


def _n(v: float) -> str:
    if not math.isfinite(v):
        return "unknown"
    return f"{v:g}" if v == int(v) else f"{v:.2f}"


def _of(v: float, one: str, many: str) -> str:
    """``v`` things: "1 link", "3 links"."""
    return f"{_n(v)} {one if v == 1 else many}"


def _pct(v: float) -> str:
    return f"{100 * v:.0f} %"


def _words(v: float) -> tuple[str, str]:
    """``tokens.score``: whose words the letter uses (pochta.antispam.tokens)."""
    if v >= 0.8:
        return (f"its words are spam's words ({v:.2f})", f"слова письма — слова спама ({v:.2f})")
    if v <= 0.2:
        return (f"its words are legitimate mail's words ({v:.2f})",
                f"слова письма — слова обычной почты ({v:.2f})")  # fmt: skip
    if v > 0.5:
        return (f"its words lean to spam's ({v:.2f})", f"слова письма ближе к спаму ({v:.2f})")
    if v < 0.5:
        return (f"its words lean to legitimate mail's ({v:.2f})",
                f"слова письма ближе к обычной почте ({v:.2f})")  # fmt: skip
    return ("its words say nothing either way", "слова письма ни о чём не говорят")


def _weighed_words(v: float) -> tuple[str, str]:
    """``tokens.weights``: the log-odds of spam the model's word weights give the letter."""
    if v > 0:
        return (f"its words, weighed together, lean to spam ({v:+.1f})",
                f"слова письма в совокупности ближе к спаму ({v:+.1f})")  # fmt: skip
    return (f"its words, weighed together, lean to legitimate mail ({v:+.1f})",
            f"слова письма в совокупности ближе к обычной почте ({v:+.1f})")  # fmt: skip


PHRASES: dict[str, Phrase] = {
    "text.words": lambda v: (_of(v, "word", "words") + " of text", f"слов в тексте: {_n(v)}"),
    "text.letters": lambda v: (_of(v, "letter", "letters") + " of text", f"букв в тексте: {_n(v)}"),
    "text.upper_ratio": lambda v: (f"{_pct(v)} of the text's letters are capitals",
                                   f"заглавных букв в тексте: {_pct(v)}"),
    "text.digit_ratio": lambda v: (f"digits are {_pct(v)} of the text's letters and digits",
                                   f"цифры — {_pct(v)} букв и цифр текста"),
    "text.exclamations": lambda v: (
        _of(v, "exclamation mark", "exclamation marks") + " in the text",
        f"восклицательных знаков в тексте: {_n(v)}"),
    "text.money": lambda v: (_of(v, "amount", "amounts") + " of money in the text",
                             f"денежных сумм в тексте: {_n(v)}"),
    "subject.chars": lambda v: (f"a subject of {_n(v)} characters",
                                f"тема из {_n(v)} символов"),
    "subject.letters": lambda v: (
        _of(v, "letter", "letters") + " in the subject",
        f"букв в теме: {_n(v)}"),
    "subject.upper_ratio": lambda v: (f"{_pct(v)} of the subject's letters are capitals",
                                      f"заглавных букв в теме: {_pct(v)}"),
    "subject.exclamations": lambda v: (
        _of(v, "exclamation mark", "exclamation marks") + " in the subject",
        f"восклицательных знаков в теме: {_n(v)}"),
    "links.count": lambda v: (_of(v, "link", "links"), f"ссылок: {_n(v)}"),
    "links.distinct_domains": lambda v: ("links to " + _of(v, "domain", "different domains"),
                                         f"доменов в ссылках: {_n(v)}"),
    "links.shortener": lambda v: (_of(v, "link", "links") + " through URL shorteners",
                                  f"ссылок через сокращатели: {_n(v)}"),
    "links.per_kchar": lambda v: (f"{_n(v)} links per 1,000 characters of text",
                                  f"ссылок на 1000 знаков текста: {_n(v)}"),
    "attachments.count": lambda v: (_of(v, "attachment", "attachments"), f"вложений: {_n(v)}"),
    "attachments.bytes": lambda v: (f"attachments of {_n(v)} bytes",
                                    f"вложения на {_n(v)} байт"),
    "html.hidden_chars": lambda v: (f"{_n(v)} characters of hidden text",
                                    f"скрытого текста: {_n(v)} знаков"),
    "headers.has_message_id": lambda v: (("has a Message-ID", "есть Message-ID") if v
                                         else ("no Message-ID", "нет Message-ID")),
    "headers.has_date": lambda v: (("has a Date", "есть дата") if v
                                   else ("no Date field", "нет поля Date")),
    "headers.message_id_malformed": lambda v: (
        ("a Message-ID no mail program writes",
         "Message-ID, какого не пишет ни одна почтовая программа")
        if v else ("a well-formed Message-ID or none", "Message-ID правильного вида или его нет")),
    "recipients.count": lambda v: (_of(v, "recipient", "recipients") + " in To and Cc",
                                   f"получателей в To и Cc: {_n(v)}"),
    "recipients.hidden": lambda v: (
        ("names no recipient (the real ones hidden in Bcc)",
         "не названо ни одного получателя (настоящие — в скрытой копии)") if v
        else ("names its recipients", "получатели названы")),
    "sender.protected": lambda v: (
        ("the sender's domain belongs to a protected organization",
         "домен отправителя принадлежит защищённой организации") if v
        else ("the sender is no protected organization",
              "отправитель — не защищённая организация")),
    "sender.freemail": lambda v: (
        ("sent from a public mail service", "отправлено с публичного почтового сервиса") if v
        else ("not sent from a public mail service", "отправлено не с публичной почты")),
    "sender.display_name_chars": lambda v: (
        (f"a sender name of {_n(v)} characters", f"имя отправителя из {_n(v)} символов") if v
        else ("no sender name", "нет имени отправителя")),
    "phish.signs": lambda v: (
        _of(v, "phishing sign", "phishing signs"),
        f"признаков фишинга: {_n(v)}"),
    "rules.content_score": lambda v: (
        f"the rules gave {v:+.1f} points for what the letter shows",
        f"правила дали {v:+.1f} балла за содержание письма"),
    "rules.phishing_score": lambda v: (f"{v:+.1f} phishing points from the rules",
                                       f"фишинговых баллов по правилам: {v:+.1f}"),
    "rules.score": lambda v: (f"the rules gave {v:+.1f} points", f"правила дали {v:+.1f} балла"),
    # features the shipped model does not read (model.design), for other models
    "text.chars": lambda v: (f"a plain-text part of {_n(v)} characters",
                             f"текстовая часть из {_n(v)} символов"),
    "html.chars": lambda v: (f"{_n(v)} characters of HTML text", f"знаков текста HTML: {_n(v)}"),
    "html.share": lambda v: (f"HTML is {_pct(v)} of the text", f"HTML — {_pct(v)} текста"),
    "html.only": lambda v: (("HTML only, no plain text", "только HTML, без простого текста") if v
                            else ("has a plain-text part", "есть простой текст")),
    "html.images": lambda v: (_of(v, "image", "images"), f"картинок: {_n(v)}"),
    "html.forms": lambda v: (_of(v, "form", "forms"), f"форм: {_n(v)}"),
    "text.cyrillic_share": lambda v: (f"{_pct(v)} Cyrillic letters", f"кириллицы: {_pct(v)}"),
    "text.latin_share": lambda v: (f"{_pct(v)} Latin letters", f"латиницы: {_pct(v)}"),
    "lang.ru": lambda v: (("written in Russian", "написано по-русски") if v
                          else ("not in Russian", "не по-русски")),
    "lang.en": lambda v: (("written in English", "написано по-английски") if v
                          else ("not in English", "не по-английски")),
    "lang.other": lambda v: (("neither Russian nor English", "ни русский, ни английский") if v
                             else ("Russian or English", "русский или английский")),
    "subject.reply": lambda v: (("the subject is a reply (Re:)", "тема — ответ (Re:)") if v
                                else ("the subject is no reply", "тема — не ответ")),
    "links.ip": lambda v: (
        _of(v, "link", "links") + " to IP addresses",
        f"ссылок на IP-адреса: {_n(v)}"),
    "links.https_share": lambda v: (f"{_pct(v)} of links are https", f"https-ссылок: {_pct(v)}"),
    "headers.count": lambda v: (
        _of(v, "header field", "header fields"),
        f"полей заголовка: {_n(v)}"),
    "headers.received": lambda v: (
        _of(v, "Received field", "Received fields"),
        f"полей Received: {_n(v)}"),
    "headers.has_list_unsubscribe": lambda v: (
        ("has List-Unsubscribe", "есть List-Unsubscribe") if v
        else ("no List-Unsubscribe", "нет List-Unsubscribe")),
    "headers.has_list_id": lambda v: (
        ("has List-Id (a mailing list)", "есть List-Id (список рассылки)") if v
        else ("no List-Id", "нет List-Id")),
    "headers.message_id_aligned": lambda v: (
        ("the Message-ID is on the sender's own domain", "Message-ID — на домене отправителя")
        if v else ("the Message-ID is not on the sender's domain",
                   "Message-ID — не на домене отправителя")),
    "headers.return_path_aligned": lambda v: (
        ("the return address is on the sender's domain", "обратный адрес — на домене отправителя")
        if v else ("the return address is on another domain",
                   "обратный адрес — на другом домене")),
    "links.own_share": lambda v: (
        f"{_pct(v)} of links go to the sender's own site",
        f"ссылок на сайт самого отправителя: {_pct(v)}"),
    "tokens.score": lambda v: _words(v),
    "tokens.weights": lambda v: _weighed_words(v),
    "headers.has_in_reply_to": lambda v: (
        ("answers an earlier letter (In-Reply-To)", "ответ на письмо (In-Reply-To)") if v
        else ("answers no earlier letter", "не ответ на другое письмо")),
}  # fmt: skip


def _lean(t: int, window: str, v: float) -> tuple[str, str]:
    what_en, what_ru = SHINGLE_WHAT.get(t, (f"sharing shingle type {t}", f"с шинглом типа {t}"))
    when_en, when_ru = WINDOWS.get(window, (f"in {window}", f"за {window}"))
    if v == 0:
        return (f"nothing is known of letters {what_en} {when_en}",
                f"о письмах {what_ru} {when_ru} ничего не известно")  # fmt: skip
    much_en, much_ru = ("mostly", "в основном") if abs(v) >= 0.5 else ("partly", "отчасти")
    if v > 0:
        return (f"letters {what_en} {when_en} were {much_en} spam",
                f"письма {what_ru} {when_ru} были {much_ru} спамом")  # fmt: skip
    return (f"letters {what_en} {when_en} were {much_en} legitimate",
            f"письма {what_ru} {when_ru} были {much_ru} хорошими")  # fmt: skip


def _stat(t: int, stat: str, window: str, v: float) -> tuple[str, str] | None:
    what_en, what_ru = SHINGLE_WHAT.get(t, (f"sharing shingle type {t}", f"с шинглом типа {t}"))
    when_en, when_ru = WINDOWS[window]
    if not math.isfinite(v):
        return (f"nothing is known of letters {what_en} {when_en}",
                f"о письмах {what_ru} {when_ru} ничего не известно")  # fmt: skip
    if stat == "volume":
        n = round(math.expm1(v))
        return (f"{n} letters {what_en} {when_en}", f"писем {what_ru} {when_ru}: {n}")
    if stat in _STATS:
        did_en, did_ru = _STATS[stat]
        return (f"{_pct(v)} of letters {what_en} {when_en} {did_en}",
                f"{_pct(v)} писем {what_ru} {when_ru} {did_ru}")  # fmt: skip
    return None


def phrase(feature: str, value: float) -> tuple[str, str]:
    """``feature`` = ``value`` in English and in Russian."""
    if feature in PHRASES:
        if not math.isfinite(value):
            return f"{feature}: unknown", f"{feature}: неизвестно"
        return PHRASES[feature](value)
    m = _LEAN.match(feature)
    if m:
        return _lean(int(m.group(1)), m.group(2), value)
    m = _STAT.match(feature)
    if m:
        said = _stat(int(m.group(1)), m.group(2), m.group(3), value)
        if said is not None:
            return said
    if feature.startswith("sign.") and feature[5:] in SPECS:
        spec = SPECS[feature[5:]]
        if value:
            return spec.en, spec.ru
        return (f"no sign {feature[5:]}", f"нет признака {feature[5:]}")
    m = _AUTH.match(feature)
    if m:
        what = m.group(1).upper().replace("_POLICY", " policy")
        if value:
            return f"{what}: {m.group(2)}", f"{what}: {m.group(2)}"
        return f"{what} is not {m.group(2)}", f"{what} — не {m.group(2)}"
    return f"{feature} = {_n(value)}", f"{feature} = {_n(value)}"


def explain(
    model: Model, features: Mapping[str, float], top: int = TOP, words: Sequence[str] = ()
) -> list[Reason]:
    """The ``top`` features whose SHAP values are largest in size, largest first; ``words``:
    the letter's surest words behind ``tokens.score``, named in its phrase."""
    pushes, _ = model.contributions(features)
    row = model.row(features)
    order = sorted(range(len(pushes)), key=lambda i: -abs(pushes[i]))
    out = []
    for i in order[:top]:
        if pushes[i] == 0:
            break
        en, ru = phrase(model.columns[i], row[i])
        if model.columns[i] == "tokens.score" and words:
            said = ", ".join(f"«{w.removeprefix('s:')}»" for w in words)
            en, ru = f"{en}: {said}", f"{ru}: {said}"
        out.append(Reason(model.columns[i], row[i], pushes[i], "log-odds", en, ru))
    return out


def from_rules(hits: Sequence[Hit], top: int = TOP) -> list[Reason]:
    """A verdict the rules gave: the rules that added (or took) the most points."""
    scored = sorted((h for h in hits if h.score), key=lambda h: -abs(h.score))
    return [
        Reason(f"rule.{h.symbol}", 1.0, h.score, "points", h.description, h.description_ru)
        for h in scored[:top]
    ]
