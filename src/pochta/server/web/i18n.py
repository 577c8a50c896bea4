"""The pages' words in Russian and English, and which one a reader gets: the language they
chose (a cookie set by the switch), else the first of ru / en in Accept-Language, else
English. The phishing signs' explanations come from their registry, in both languages."""

from __future__ import annotations

import re
from typing import Literal

Lang = Literal["ru", "en"]
LANGS: tuple[Lang, ...] = ("en", "ru")

_RANGE = re.compile(r"([A-Za-z]{1,8})(?:-[A-Za-z0-9]{1,8})*(?:\s*;\s*q\s*=\s*([0-9.]{1,5}))?")


def from_accept_language(header: str | None) -> Lang | None:
    """The first of ru / en the header prefers (by q-value), or None."""
    best: tuple[float, int, Lang] | None = None
    for position, item in enumerate((header or "")[:512].split(",")[:32]):
        m = _RANGE.fullmatch(item.strip())
        if not m:
            continue
        tag = m.group(1).lower()
        try:
            q = float(m.group(2)) if m.group(2) else 1.0
        except ValueError:
            continue
        if tag in LANGS and q > 0 and (best is None or (q, -position) > (best[0], best[1])):
            best = (q, -position, tag)
    return best[2] if best else None


def choose(cookie: str | None, accept_language: str | None) -> Lang:
    if cookie in LANGS:
        return cookie
    return from_accept_language(accept_language) or "en"


WORDS: dict[str, tuple[str, str]] = {  # key: (en, ru)
    "webmail": ("Mail", "Почта"),
    "admin": ("Admin", "Управление"),
    "login_title": ("Log in to pochta", "Вход в почту"),
    "email": ("E-mail", "Адрес"),
    "password": ("Password", "Пароль"),
    "log_in": ("Log in", "Войти"),
    "log_out": ("Log out", "Выйти"),
    "wrong_login": ("Wrong e-mail or password.", "Неверный адрес или пароль."),
    "rate_limited": (
        "Too many login attempts. Try again in {seconds} s.",
        "Слишком много попыток входа. Попробуйте через {seconds} с.",
    ),
    "tls_required": (
        "Passwords are taken over HTTPS only: open this page with https://.",
        "Пароль принимается только по HTTPS: откройте эту страницу через https://.",
    ),
    "reset_required": (
        "This password appeared in a leak and no longer works; ask for a new one.",
        "Этот пароль оказался в утечке и больше не действует; попросите новый.",
    ),
    "folders": ("Folders", "Папки"),
    "unread": ("unread", "непрочитанных"),
    "no_letters": ("No letters here.", "Писем нет."),
    "older": ("Older letters", "Более старые письма"),
    "newest": ("Newest letters", "Самые новые"),
    "from": ("From", "От"),
    "to": ("To", "Кому"),
    "cc": ("Cc", "Копия"),
    "subject": ("Subject", "Тема"),
    "date": ("Date", "Дата"),
    "no_subject": ("(no subject)", "(без темы)"),
    "spam": ("Spam", "Спам"),
    "not_spam": ("Not spam", "Не спам"),
    "delete": ("Delete", "Удалить"),
    "move_to": ("Move to", "Переместить в"),
    "move": ("Move", "Переместить"),
    "attachments": ("Attachments", "Вложения"),
    "download": ("download", "скачать"),
    "show_images": ("Show images", "Показать картинки"),
    "images_blocked": (
        "{n} remote image(s) blocked: loading them would tell the sender you read this.",
        "Заблокировано внешних картинок: {n}. Загрузив их, вы сообщите отправителю, что "
        "прочли письмо.",
    ),
    "images_shown": ("Remote images are shown.", "Внешние картинки показаны."),
    "hide_images": ("Hide images", "Скрыть картинки"),
    "html_too_big": (
        "This letter's HTML is too large to show; here is its text.",
        "HTML этого письма слишком велик для показа; вот его текст.",
    ),
    "no_text": ("(this letter has no text)", "(в письме нет текста)"),
    "phishing_title": (
        "Careful: this letter shows signs of phishing",
        "Осторожно: у письма есть признаки фишинга",
    ),
    "phishing_intro": (
        "Do not follow its links, open its attachments or send it any data until you have "
        "checked the sender another way.",
        "Не переходите по ссылкам, не открывайте вложения и не сообщайте никаких данных, пока "
        "не проверите отправителя другим способом.",
    ),
    "imitates": ("imitates", "подделывает"),
    "link_shows": ("the link shows", "ссылка показывает"),
    "leads_to": ("but leads to", "а ведёт на"),
    "received_from": ("came through", "пришло через"),
    "verdict": ("Verdict", "Вердикт"),
    "verdict_ham": ("not spam", "не спам"),
    "verdict_spam": ("spam", "спам"),
    "verdict_phishing": ("phishing", "фишинг"),
    "sender_stats": ("This sender's letters over 14 days", "Письма этого отправителя за 14 дней"),
    "share_spam": ("judged spam", "признаны спамом"),
    "share_complaint": ("marked as spam by readers", "отмечены читателями как спам"),
    "share_none": ("none", "ни одного"),
    "share_under": ("under {percent} %", "менее {percent} %"),
    "share_about": ("about {percent} %", "около {percent} %"),
    "moved_to": ("Moved to {folder}.", "Перемещено в «{folder}»."),
    "deleted": ("The letter was deleted.", "Письмо удалено."),
    "back": ("Back to {folder}", "Назад в «{folder}»"),
    "language": ("Language", "Язык"),
    "not_found": ("Not found", "Не найдено"),
    "not_found_text": (
        "There is no such page or letter here.",
        "Такой страницы или письма здесь нет.",
    ),
    "server_error": (
        "The server could not answer; the error is in its log. Try again in a moment.",
        "Сервер не смог ответить; ошибка записана в его журнал. Попробуйте чуть позже.",
    ),
    "forbidden": ("Forbidden", "Доступ запрещён"),
    "forbidden_admin": (
        "These pages are for administrators.",
        "Эти страницы — для администраторов.",
    ),
    "forbidden_csrf": (
        "The form was stale or forged; open the page again and retry.",
        "Форма устарела или подделана; откройте страницу заново и повторите.",
    ),
    "error": ("Something went wrong", "Что-то пошло не так"),
    "lists": ("Sender lists", "Списки отправителей"),
    "lists_intro": (
        "Letters from an address or a domain you trust never go to Spam; letters from one you"
        " block always do. A trusted sender is still checked: a phishing letter, or one whose"
        " From is forged (it fails DMARC, its name or Reply-To imitates someone else; for a"
        " domain, it does not prove it comes from there), is not let through on the list alone.",
        "Письма от адреса или домена, которому вы доверяете, не попадают в «Спам»; письма от"
        " заблокированного — попадают всегда. Доверенного отправителя всё равно проверяют:"
        " фишинговое письмо или письмо с поддельным From (не проходит DMARC, имя или Reply-To"
        " выдают себя за другого; для домена — письмо не доказывает, что оно оттуда) одним"
        " списком не пропускается.",
    ),
    "no_entries": ("Your list is empty.", "Ваш список пуст."),
    "entry": ("Address or domain", "Адрес или домен"),
    "action_allow": ("never spam", "не спам"),
    "action_block": ("always spam", "всегда спам"),
    "add": ("Add", "Добавить"),
    "remove": ("Remove", "Удалить"),
    "trust_sender": ("Always trust {sender}", "Всегда доверять {sender}"),
    "trust_domain": ("Always trust {domain}", "Всегда доверять {domain}"),
    "block_sender": ("Always spam from {sender}", "Всегда спам от {sender}"),
    "list_changed": ("Your sender list was changed.", "Список отправителей изменён."),
}


def word(lang: Lang, key: str, **values: object) -> str:
    en, ru = WORDS[key]
    text = ru if lang == "ru" else en
    return text.format(**values) if values else text
