r"""What today's phishing letters do that the older signs miss (issue 28, item 6). Pure.

- account lures: the password "expires" and "can be kept", the mailbox is "full" or holds
  "pending messages", a wallet wants its "recovery phrase", the account must be
  "revalidated" (:data:`ACCOUNT_LURE`);
- fees: a small customs, delivery or "unlock" fee, a payment method to "update", money to a
  card number written in the letter, the pay to go to new bank details (:data:`FEE_REQUEST`);
- service roles in a display name: "IT Helpdesk", "Служба безопасности" (:data:`ROLE`), and
  the mail administrator's among them: "Mail Administrator", "Webmail Support"
  (:data:`MAIL_ROLE`);
- a QR code to scan (:data:`QR`);
- a number to call about a charge or a sign-in the reader did not make (:data:`CALLBACK_CALL`,
  :data:`CALLBACK_REASON`);
- invisible characters inside words (:func:`split_words`): "Pass\u200bword" reads as
  "Password" and is no word a filter knows;
- an HTML file attached that collects data or sends the reader elsewhere
  (:func:`html_attachment`).

Texts are folded first (:func:`pochta.antispam.signs.wording.fold`, which removes the
invisible characters: :func:`split_words` reads the text before folding). Every pattern runs
in linear time behind RE2's prefilter (:func:`pochta.antispam.signs.wording.first_candidate`),
and every input is cut to a bound first.
"""

from __future__ import annotations

import re
from typing import Any

import re2

from pochta.antispam.signs import wording
from pochta.antispam.signs.wording import _rx

MAX_HTML_FILE = 1 << 20  # bytes of an HTML attachment read
MAX_HTML_FILES = 10  # HTML attachments read per letter
SPLIT_READ = 200_000  # characters of text searched for split words

ACCOUNT_LURE = _rx(
    # the password: expiring, to be kept
    r"\b(?:keep|retain|continue\s+(?:using|with))\s+(?:your\s+|the\s+)?(?:current|same|existing"
    r"|old|present)\s+password",
    r"\bpassword\s+(?:is\s+|will\s+)?(?:expir\w{0,10}+|due\s+to\s+expire)",
    r"(?:сохранить|оставить)\s+(?:свой\s+|ваш\s+)?(?:текущ|прежн|стар)\w{0,40}+\s+парол\w*",
    r"(?:срок\w{0,40}+\s+действия\s+(?:вашего\s+)?парол\w*|парол\w{0,40}+\s+(?:истека|истек)\w*)",
    # the mailbox: full, messages held
    r"\b(?:mailbox|inbox|e-?mail\s+(?:account|storage)|storage|quota)\s+(?:is\s+|has\s+)?"
    r"(?:almost\s+|nearly\s+)?(?:full|exceeded|over\s+(?:its\s+)?(?:limit|quota)|reached)",
    r"\b(?:\d{1,4}\s+)?(?:pending|held|undelivered|blocked|suspended|quarantined)\s+"
    r"(?:incoming\s+)?(?:messages|e-?mails|mails)\b",
    r"\brelease\s+(?:your\s+|the\s+)?(?:pending\s+|held\s+)?(?:messages|e-?mails|mails)\b",
    r"(?:почтов\w{0,40}+\s+ящик\w*|хранилищ\w*)\s+(?:почти\s+|переполнен\w*|заполнен\w*)",
    r"(?:недоставлен|задержан|заблокирован)\w{0,40}+\s+(?:\d+\s+)?(?:входящ\w{0,40}+\s+)?"
    r"(?:письм|сообщени)\w*",
    r"(?:письм|сообщени)\w{0,40}+\s+(?:были\s+)?(?:задержан|не\s+доставлен|приостановлен)\w*",
    # the account: to be revalidated
    r"\b(?:re-?validate|revalidate|re-?activate|re-?confirm|re-?verify|re-?authenticate)\s+"
    r"(?:your\s+)?(?:account|mailbox|e-?mail|wallet|identity|access)",
    r"\bverify\s+(?:your\s+)?(?:mailbox|e-?mail\s+account|wallet|webmail)",
    r"(?:повторно\s+)?(?:подтвердите|верифицируйте|активируйте)\s+(?:ваш\w*\s+|сво\w+\s+)?"
    r"(?:почтов\w{0,40}+\s+ящик|учетн\w{0,40}+\s+запис|кошел[её]к|аккаунт)\w*",
    # signing in again, with the work mailbox
    r"\b(?:re-?authenticat\w*|re-?register|re-?enrol\w*)\s+(?:your\s+)?(?:mfa|2fa|account"
    r"|device|authenticator|multi-?factor)",
    r"\b(?:mfa|2fa|multi-?factor|two-?factor)\s+(?:re-?registration|re-?enrollment|setup"
    r"|update|reset|re-?authentication)",
    r"\b(?:sign|log)\s*(?:in|on)\s+with\s+(?:your\s+)?(?:work|corporate|company|office|business"
    r"|e-?mail)\s+(?:account|e-?mail|credentials|address\s+and\s+password)",
    r"повторн\w{0,40}+\s+(?:авторизаци|аутентификаци|вход|регистраци)\w*",
    r"(?:войдите|войдя|зайдите|авторизуйтесь|выполните\s+вход)\s+(?:с|под|через)\s+"
    r"(?:сво\w+\s+|ваш\w*\s+)?(?:корпоративн|рабоч|служебн|почтов)\w*",
    # signing in on somebody's page "through" a messenger: the code that comes is the
    # account's (the stolen Telegram accounts of the voting lures). Not "вход через
    # Госуслуги": the state portal's sign-in, which schools, clinics and shops offer
    r"(?:войти|войдите|вход|авторизоваться|авторизуйтесь|зайти|зайдите)\s+(?:\w+\s+)?через\s+"
    r"(?:telegram|телеграм|whatsapp|ватсап|вотсап)\w*",
    r"\b(?:log|sign)\s*in\s+(?:with|via|through)\s+(?:your\s+)?(?:telegram|whatsapp)\b",
    # the wallet: its secret words
    r"\b(?:recovery|seed|secret|mnemonic|backup)\s+(?:phrase|words)\b",
    r"\b(?:sync|synchroni[sz]e|validate|connect)\s+(?:your\s+)?wallet\b",
    r"(?:сид|seed|секретн|мнемоническ)\w{0,40}+[- ]фраз\w*|фраз\w{0,40}+\s+восстановлени\w*",
)

FEE_REQUEST = _rx(
    r"\b(?:pay|settle)\s+(?:the\s+|a\s+|your\s+)?(?:small\s+|outstanding\s+|pending\s+)?"
    r"(?:customs|import|shipping|delivery|redelivery|re-delivery|handling|clearance|release"
    r"|unlock\w*|processing|transfer)\s+(?:fee|duty|duties|charge|tax)",
    # an unpaid road toll (the toll-payment lures of 2024-2026, phish28d)
    r"\bunpaid\s+(?:road\s+)?tolls?\b",
    r"\b(?:customs|redelivery|re-delivery|clearance|shipping|delivery|handling)\s+(?:fee|duty"
    r"|duties|charge)s?\s+(?:of\s+)?(?:[$€£]|\d)",
    r"\bupdate\s+(?:your\s+)?(?:payment|billing|card)\s+(?:method|details|information|info)",
    r"(?:оплат\w{0,40}+|погас\w{0,40}+|внес\w{0,40}+)\s+(?:\w+\s+){0,2}(?:таможенн\w{0,40}+\s+"
    r"(?:пошлин|сбор|платеж)|пошлин|комисси|сбор\b|страхов\w{0,40}+\s+(?:взнос|сбор)"
    r"|доставк|хранени)\w*",
    r"(?:таможенн\w{0,40}+\s+(?:пошлин|сбор|платеж)|пошлин\w*|плат\w{0,40}+\s+за\s+"
    r"(?:хранени|доставк|разблокировк))\w*\s+(?:в\s+размере\s+)?\d",
    r"обновит\w{0,40}+\s+(?:платежн\w{0,40}+\s+(?:данн|реквизит|информаци)|данн\w{0,40}+\s+"
    r"(?:оплаты|карты))\w*",
    # the pay going to another account: "update my direct deposit", "our bank details have
    # changed" (the business e-mail compromise's one request, with no link or file)
    r"\b(?:update|change|switch)\s+(?:my|his|her|the|our)\s+(?:direct\s+deposit|payroll\s+"
    r"(?:account|details|deposit)|bank(?:ing)?\s+(?:details|account|information|info))",
    r"\b(?:changed|switched)\s+(?:my|our)\s+bank(?:s|ing\s+details|\s+account)?\b",
    r"\b(?:bank(?:ing)?|account|payment)\s+details\s+have\s+(?:been\s+)?(?:changed|updated)",
    r"(?:изменил\w*|сменил\w*|поменял\w*|изменени\w*|смен[аеуы])\s+(?:\w+\s+){0,2}?"
    r"(?:банковск\w+\s+|платежн\w+\s+)?реквизит\w*",
    r"(?:переводите|перечисляйте)\s+(?:\w+\s+){0,2}?(?:зарплат|оплат)\w*\s+на\s+(?:нов|друг)\w*",
    # money sent to a card number written in the letter: no shop or service takes it so
    r"(?:переведите|перевести|перечислите|отправьте|внесите)\s+(?:[\w.,]+\s+){0,5}?на\s+"
    r"(?:карту|номер\s+карты)\s+(?:\w+\s+){0,2}?\d{4}[\s-]?\d{4}[\s-]?\d{4}",
    r"\b(?:send|transfer|wire|pay)\s+(?:[\w.,$]+\s+){0,5}?to\s+(?:the\s+|this\s+|my\s+|our\s+)?"
    r"card\s+(?:number\s+)?\d{4}[\s-]?\d{4}[\s-]?\d{4}",
)

MAIL_ROLE = _rx(
    r"\b(?:mail|e-?mail|webmail|mailbox|outlook|exchange|owa)\s*(?:server\s+)?(?:admin\w*"
    r"|support|team|service|services|desk|center|centre|security|system|notification\w*"
    r"|delivery|quota|upgrade)\b",
    r"\b(?:postmaster|mailer-daemon|system\s+administrator|it\s+(?:helpdesk|help"
    r"\s*desk|service\s*desk|support|department|admin\w*))\b",
    r"(?:администратор\w*|администраци\w*|поддержк\w*|служб\w*)\s+(?:почт\w*|почтового"
    r"\s+сервера|сервера)",
    r"\bпочтов\w*\s+(?:служб|сервер|администратор|поддержк|систем)\w*",
)

ROLE = _rx(
    r"\b(?:support|security|helpdesk|help\s*desk|service\s*desk|it\s+(?:department|support"
    r"|team|services?|admin\w*)|administrator|admin|postmaster|webmaster|webmail|mailbox"
    r"|e-?mail\s+(?:team|admin\w*|service|support|security|server)|mail\s+(?:team|admin\w*"
    r"|service|server|delivery)|billing|account\s+(?:team|services?|security)|customer\s+"
    r"(?:care|service|support)|notifications?|verification|compliance|payroll|customs"
    r"|delivery\s+(?:service|department)|no-?reply)\b",
    r"\b(?:служб\w*|поддержк\w*|техподдержк\w*|безопасност\w*|администрац\w*|администратор\w*"
    r"|бухгалтери\w*|отдел\w*|уведомлени\w*|таможн\w*|доставк\w*|курьерск\w*)",
)

# -- callback lures: a number to call instead of a link ------------------------------------------
# The call: a verb that asks to call, then (within the sentence's words, no digits between) a
# phone number of 10 digits or more (:data:`CALLBACK_DIGITS`, counted by the check: a short
# bank number such as 900 is no stranger's). The reason: a charge or a sign-in the reader
# did not make, to cancel, refund, dispute or block (:data:`CALLBACK_REASON`).
CALLBACK_CALL = _rx(
    r"\b(?:call|phone|dial|ring|contact|reach)\b[^.0-9]{0,80}?\+?\(?\d[\d ().\n-]{8,20}\d",
    r"(?:позвоните|звоните|перезвоните|наберите|свяжитесь|обратитесь|звонок)[^.0-9]{0,80}?"
    r"\+?\(?\d[\d ().\n-]{8,20}\d",
)
CALLBACK_REASON = _rx(
    r"\b(?:did\s+not|didn'?t|never)\s+(?:authori[sz]e|make|request|place|order|initiate"
    r"|approve|recogni[sz]e|sign\s+up)",
    # an unauthorized charge or sign-in, not a disclaimer's "any unauthorized use or
    # disclosure" under a signature with a phone number
    r"\bunauthori[sz]ed\s+(?:\w+\s+){0,2}?(?:charge|transaction|payment|purchase|withdrawal"
    r"|debit|order|sign-?in|log-?in|login|activity|attempt)",
    # a charge to undo, not a subscription to a newsletter ("to cancel, contact ..." of 2002)
    # nor a shop's refund already made ("questions about your refund, call us"): a refund
    # to claim or to get (phish28b)
    r"\b(?:claim|get|receive|request|process)\s+(?:a\s+|your\s+|the\s+)?(?:full\s+)?refund\w*"
    r"|\bstop\s+the\s+(?:payment|charge|renewal)",
    r"\bdispute\w*\s+(?:\w+\s+){0,2}?(?:charge|payment|transaction|order|purchase)",
    r"\bcancel\w*\s+(?:\w+\s+){0,2}?(?:charge|payment|order|transaction|renewal|purchase)",
    r"\bif\s+(?:this|it)\s+(?:was\s+not|wasn'?t)\s+you\b",
    r"если\s+(?:это\s+)?(?:были?\s+|была\s+)?не\s+вы\b",
    r"\bне\s+(?:совершали|оформляли|заказывали|подтверждали|входили|запрашивали|подписывались)",
    # blocking what the reader owns, a return of money to claim: not any "возврат" (a shop's
    # return of goods) or "заблокирован" (phish28b)
    r"(?:заблокир|блокир)\w*\s+(?:\w+\s+){0,2}?(?:карт|счет|операци|перевод|доступ|кредит"
    r"|заявк|аккаунт|личн\w*\s+кабинет)\w*",
    r"(?:оформ|получ|вернут)\w*\s+(?:\w+\s+)?возврат\w*\s+(?:\w+\s+)?(?:средств|денег|платеж|списан)\w*",
    r"отмен\w*\s+(?:\w+\s+){0,2}?(?:операци|платеж|списани|перевод|заказ|транзакци|покупк)\w*",
    r"вернуть\s+(?:\w+\s+)?(?:деньги|средства|оплату)",
    # the code from an SMS, to be told on the phone: what the call is for
    r"(?:назовите|продиктуйте|сообщите|скажите)\s+(?:\w+\s+){0,3}?код\w*",
    r"\b(?:read|tell|give)\s+(?:\w+\s+){0,3}?(?:the\s+)?(?:one-time\s+|verification\s+|sms\s+)?code\b",
)
CALLBACK_DIGITS = 10
CALLBACK_READ = 100_000
"""Characters of the text searched for the call, in a letter that gives a reason: the call's
pattern is not in the one RE2 pass every letter pays for (its bounded runs of any character
made that pass's automaton larger: the checks cost a third more), and is searched by Python's
engine only after :data:`CALLBACK_REASON` matched, over this bound."""

# -- business e-mail compromise (phish28b) ------------------------------------------------------
# Money asked of somebody at an organization by a public mailbox (checks.bec_request): pay
# diverted to new bank details (:data:`BEC_MONEY`: "update my direct deposit", "our bank
# details have changed"), gift cards to buy and their codes to send (:data:`BEC_GIFT` with
# :data:`BEC_CODES`), or a payment to make while the writer cannot be reached or asks for
# secrecy (:data:`BEC_PAYMENT` with :data:`BEC_HUSH`): the one request of a letter with no
# link and no file.
BEC_MONEY = _rx(
    r"\b(?:update|change|switch)\s+(?:my|his|her|the|our)\s+(?:direct\s+deposit|payroll\s+"
    r"(?:account|details|deposit)|bank(?:ing)?\s+(?:details|account|information|info)"
    r"|salary\s+account|paycheck)",
    r"\b(?:changed|switched)\s+(?:my|our)\s+bank(?:s|ing\s+details|\s+account)?\b",
    r"\b(?:bank(?:ing)?|account|payment|remittance)\s+(?:details|instructions)\s+have\s+"
    r"(?:been\s+)?(?:changed|updated)",
    r"\b(?:remit|pay|send|transfer)\s+(?:\w+\s+){0,6}?to\s+(?:our|my|the)\s+new\s+"
    r"(?:bank\s+)?account",
    r"(?:изменил\w*|сменил\w*|поменял\w*|изменени\w*|смен[аеуы])\s+(?:\w+\s+){0,2}?"
    r"(?:банковск\w+\s+|платежн\w+\s+)?реквизит\w*",
    r"(?:переводите|перечисляйте|перечислить|перевести|оплатить)\s+(?:\w+\s+){0,3}?на\s+"
    r"(?:нов|друг)\w*\s+(?:расчетн\w*\s+|банковск\w*\s+)?(?:счет|карт|реквизит)\w*",
    r"(?:зарплат\w*|заработн\w*\s+плат\w*)\s+(?:\w+\s+){0,3}?на\s+(?:нов|друг)\w*",
)
# gift cards to buy (:data:`BEC_GIFT`) and their codes to send (:data:`BEC_CODES`): a parent's
# "we'd like to get gift cards for the teachers" asks for no codes
BEC_GIFT = _rx(
    r"\b(?:buy|purchase|get|pick\s+up|need|want)\s+(?:[\w$]+\s+){0,4}?gift\s*cards?\b",
    r"(?:купи|купить|купите|приобрети|приобрести|приобретите|нужн\w*)\s+(?:\w+\s+){0,4}?"
    r"подарочн\w*\s+(?:карт|сертификат)\w*",
)
BEC_CODES = _rx(
    r"\b(?:send|e-?mail|text|forward)\s+(?:me\s+|us\s+)?(?:the\s+|a\s+)?(?:pictures?\s+of\s+"
    r"|photos?\s+of\s+|scans?\s+of\s+)?(?:the\s+|all\s+)?(?:card\s+|claim\s+|redemption\s+)?"
    r"(?:codes|numbers|pins)\b",
    r"\bscratch\s+(?:off\s+)?the\s+back",
    r"(?:пришли|пришлите|отправь|отправьте|скинь|скиньте)\s+(?:мне\s+)?(?:фото\s+)?(?:\w+\s+)?"
    r"код\w*",
    r"(?:сфотографир|сотри|сотрите)\w*\s+(?:\w+\s+){0,2}?(?:код|защитн)\w*",
)
BEC_PAYMENT = _rx(
    # "wire the funds", not the noun of "the wire transfer is done" (review1)
    r"\b(?:pay|settle|process|send)\s+(?:\w+\s+){0,3}?(?:invoice|payment|wire|transfer|funds)\b",
    r"\bwire\s+(?:\w+\s+){0,3}?(?:payment|funds|money|amount)\b",
    r"(?:оплатить|оплати|оплатите|перевести|переведи|переведите|перечислить|перечисли)\s+"
    r"(?:\w+\s+){0,3}?(?:счет|платеж|аванс|сумм|деньги|средств)\w*",
)
BEC_HUSH = _rx(
    r"\b(?:in|into|at)\s+(?:a\s+|the\s+)?(?:board\s+|client\s+|long\s+)?(?:meeting|conference)"
    r"s?\b[^.\n]{0,40}?(?:can'?t|cannot|unable\s+to|not\s+able\s+to)\s+(?:talk|take\s+"
    r"(?:your\s+|any\s+)?calls?|answer|speak)",
    r"\b(?:can'?t|cannot|unable\s+to)\s+(?:talk|take\s+(?:your\s+|any\s+)?calls?|speak)\s+"
    r"(?:right\s+)?now\b",
    r"\b(?:e-?mail|text)\s+only\s+(?:please|for\s+now|today)\b",
    r"\b(?:reply|respond|contact\s+me|write)\s+(?:by|via|over)\s+e-?mail\s+only\b",
    r"\bkeep\s+(?:this|it)\s+(?:between\s+us|confidential|to\s+yourself)",
    r"(?:на\s+совещании|на\s+переговорах|на\s+встрече)[^.\n]{0,40}?(?:не\s+могу|неудобно)\s+"
    r"(?:говорить|разговаривать|звонить|ответить)",
    r"(?:звонить|говорить|разговаривать)\s+не\s+могу",
    r"(?:никому|пока\s+никому)\s+(?:\w+\s+)?не\s+(?:говори|говорите|сообщай|сообщайте|рассказывай)",
    r"конфиденциальн\w*\s+(?:сделк|вопрос|поручени)\w*",
    r"по\s+телефону\s+(?:\w+\s+){0,3}?(?:недоступ|не\s+дозвон)\w*",
    r"\bphone\s+lines?\s+(?:are|is)\s+(?:\w+\s+)?(?:down|being\s+upgraded|unavailable)",
)

# A payment asked for while the writer cannot be reached (:data:`BEC_PAYMENT` with
# :data:`BEC_HUSH`) is BEC only when it presses as well: today, now, within the hour (in the
# payment's own sentence or the subject: "I'm in meetings all day today" is no deadline,
# review2), or in secret (:data:`BEC_SECRET`). "Please pay the Vector invoice tomorrow, I'm in
# meetings all day and can't talk" is what a director writes to her own accountant from her
# gmail.com (phish28c).
BEC_PRESS = _rx(
    r"\b(?:today|tonight|right\s+away|right\s+now|asap|as\s+soon\s+as\s+possible|immediately"
    r"|urgent\w*|within\s+(?:the\s+|an\s+)?(?:hour|\d{1,2}\s+hours?|minutes)|before\s+\d{1,2}"
    r"(?::\d\d)?\s*(?:am|pm)?\b|by\s+(?:\d{1,2}(?::\d\d)?\s*(?:am|pm)|noon|end\s+of\s+(?:the\s+)?"
    r"day|eod|cob))",
    r"\bсрочн\w*|\bсегодня\b|\bнемедленно\b|прямо\s+сейчас|в\s+течение\s+(?:часа|\d{1,2}\s+час)"
    r"|\bдо\s+\d{1,2}[:.]\d\d\b|до\s+конца\s+(?:рабочего\s+)?дня",
)
# ... or asks for secrecy: "keep this between us", "никому не говори", "strictly confidential"
# (not a bare "confidential": "the confidential board pack is on the drive", review2).
BEC_SECRET = _rx(
    r"\bkeep\s+(?:this|it)\s+(?:between\s+us|confidential|quiet|to\s+yourself)",
    r"\b(?:strictly|highly|completely)\s+confidential\b|\bconfidentially\b|\bbe\s+discreet\b"
    r"|\bdiscreetly\b",
    r"(?:никому|пока\s+никому)\s+(?:\w+\s+)?не\s+(?:говори|говорите|сообщай|сообщайте|рассказывай)",
    r"(?:строго|это)\s+конфиденциально\b|\bконфиденциально\s+(?:прошу|пожалуйста)",
)

# -- messengers' codes on somebody's page (phish28b) --------------------------------------------
# The code that signs in to a messenger account, asked for on a page (checks.messenger_code):
# "log in with your WhatsApp number and enter the code you get", "укажи номер телефона и
# введи код, который придёт в Telegram". The vote, the gift and the contest of the account
# thefts of 2023-2026 all end there.
MESSENGER_CODE = _rx(
    r"(?:введи|введите|ввести|вводи|укажи|укажите|указать|отправь|отправьте|пришли|пришлите)\s+"
    r"(?:\w+\s+){0,2}?код\w*",
    r"\b(?:enter|type|submit|send\s+(?:me|us))\s+(?:the\s+|your\s+)?(?:\d-digit\s+|six-digit\s+"
    r"|verification\s+|login\s+|one-time\s+|sms\s+|confirmation\s+)?code\b",
)
# searched only within a sentence of a MESSENGER_CODE match, 120 characters either side
# (checks._messenger_code): not in the shared pass
MESSENGER = _rx(r"\b(?:telegram|whatsapp|viber)\b|телеграм\w*|ватсап\w*|вотсап\w*|вайбер\w*")

# -- task scams: a "job" paid by the day, to take up in a messenger (phish28c) -----------------
# The job-offer and task scams of 2024-2026 (the FTC's and the FBI's warnings about "task
# scams", Russia's "подработка: отзывы и лайки" schemes): a job offered to a stranger
# (:data:`TASK_JOB`), pay counted by the day or paid out daily (:data:`TASK_PAY`), work that
# takes minutes a day, from a phone, with no experience (:data:`TASK_EASY`), and a messenger to
# take it up in (checks.task_scam). A recruiter's salary by the year or the month, a job
# board's shifts from its own domain, are none.
TASK_JOB = _rx(
    r"\b(?:remote|online|part-?\s?time|home-?based|flexible|side)\s+(?:\w+\s+){0,2}?(?:job|jobs"
    r"|position|work|role|gig|opportunity)\b",
    r"\b(?:offer|hire|invite|recruit)\w*\s+you\s+(?:\w+\s+){0,3}?(?:job|position|role)\b",
    r"\bwork\s+from\s+(?:home|your\s+phone)\b",
    r"\b(?:hiring|recruiting)\s+(?:\w+\s+){0,2}?(?:assistants?|workers?|helpers?|freelancers?"
    r"|members?|agents?)\b",
    r"(?:удаленн|дистанционн)\w{0,40}+\s+(?:\w+\s+)?(?:работ|подработк|занятост|ваканси)\w*",
    r"\bподработк\w*",
    r"(?:приглашаем|предлагаем)\s+(?:вас\s+)?(?:\w+\s+){0,2}?(?:работ|должност|ваканси"
    r"|подработк)\w*",
)
TASK_PAY = _rx(
    r"(?:[$€£]\s?\d[\d,.]{0,12}|\d[\d\s.,]{0,12}(?:₽|руб\w*\.?|р\.|\$|usd|usdt|€|eur\w*|долл\w*))"
    r"[^.\n]{0,30}?(?:\bdaily\b|\ba\s+day\b|\bper\s+day\b|/\s*day\b|в\s+день|в\s+сутки|за\s+день)",
    r"\b(?:paid|payouts?|payments?|pay|withdraw\w*)\s+(?:\w+\s+){0,2}?(?:daily|every\s+day"
    r"|the\s+same\s+day|same-day)\b",
    r"(?:выплат|оплат|вывод)\w*\s+(?:\w+\s+)?(?:ежедневн\w*|каждый\s+день|в\s+тот\s+же\s+день)",
    r"ежедневн\w*\s+(?:выплат|оплат)\w*",
    # pay by the piece of the task scams' work, and its payout the same day (phish28e: "$0.80 to
    # $2.50 per photo, withdrawn to your account the same day", "оплата за каждое фото, вывод на
    # карту в тот же день"): pay by the task counts only with a range of amounts or the work
    # named (TASK_WORK), as pay by the day does. No open run of words: the set's automaton
    # (wording.SET_MEMORY) holds every family's states
    r"(?:[$€£]\s?\d[\d,.]{0,12}|\d[\d\s.,]{0,12}(?:usdt?|\$|€|eur\w*|долл\w*))\s?(?:per|for\s+"
    r"each|for\s+every)\s+(?:product\s+)?(?:photo|picture|image|task|review|rating|like|video"
    r"|order)s?\b",
    r"\bоплат\w{0,10}+\s+за\s+(?:кажд\w{0,10}+\s+)?(?:фото|фотографи|задани|отзыв|лайк|оценк"
    r"|видео)\w*",
    r"\b(?:paid|withdrawn|paid\s+out)\s+to\s+(?:your|the)\s+(?:account|card|wallet)\s+the\s+same"
    r"\s+day\b",
    r"\bвывод\w{0,10}+\s+на\s+(?:карту|сч[её]т|кош[её]л[её]к)\s+в\s+тот\s+же\s+день",
)
# Pay promised as a range of amounts ("$200-$800 daily", "between 300 and 900 USD", "от 2 000
# до 5 000 руб."): what the task scams promise, where a person who needs a babysitter, a mover
# or a dog walker for a day names one sum ("2 500 руб. в день": review2).
TASK_RANGE = _rx(
    r"[$€£]\s?\d[\d,.]{0,9}\s?(?:[-–]|to)\s?[$€£]?\s?\d[\d,.]{0,9}",
    r"\b\d[\d,.]{0,9}\s?(?:[-–]|to|and)\s?\d[\d,.]{0,9}\s?(?:usdt?|eur\w*|dollars?|\$|€|£)",
    r"\d[\d\s.,]{0,9}(?:[-–]|до)\s?\d[\d\s.,]{0,9}(?:₽|руб\w*|р\.|\$|usdt?|€|долл\w*)",
)
# The work of a task scam (phish28d): rating, reviewing or liking products, apps, videos or
# hotels, "optimizing" them, "boosting" their ratings ("help merchants boost their app
# ratings", "ставить лайки и писать отзывы"): with it, one sum a day is the scam's pay too,
# where a babysitter's, a mover's or a shop assistant's day names none of it (review2). "Like"
# is the verb only before videos or posts: "tasks like listing new products" is a shop
# helper's; a shop's "оценка товара при приёмке" (appraising goods as they arrive) is no
# rating on a marketplace (review1).
TASK_WORK = _rx(
    r"\b(?:rat(?:e|es|ing)|review(?:s|ing)?|liking|boost(?:s|ing)?|optimi[sz](?:e|es|ing))"
    r"\s+(?:\w+\s+){0,3}?(?:products?|apps?|applications?|videos?|hotels?|items?|ratings?"
    r"|reviews?|merchants?)\b",
    r"\blikes?\s+(?:\w+\s+){0,2}?(?:videos?|posts?)\b",
    r"\b(?:product|app|data|hotel)\s+(?:optimi[sz]ation|rating|review)s?\b",
    r"(?:ставить|ставите|поставить|ставим)\s+лайк\w*|лайк\w*\s+и\s+(?:писать\s+)?отзыв\w*",
    r"(?:писать|оставлять|написать|оставить)\s+отзыв\w*|оцени\w*\s+товар\w*",
    r"оценк\w*\s+товар\w*\s+на\s+маркетплейс\w*",
)
TASK_EASY = _rx(
    r"\bno\s+(?:prior\s+)?experience\s+(?:is\s+)?(?:needed|required|necessary)\b",
    r"\b(?:\d{1,3}\s*[-–]\s*)?\d{1,3}\s+(?:minutes|mins|hours?)\s+(?:a|per)\s+day\b",
    r"\b(?:one|two|an?)\s+(?:hour|hours)\s+(?:a|per)\s+day\b",
    r"\b(?:on|from)\s+your\s+(?:phone|smartphone|mobile)\b",
    r"опыт\w*\s+(?:работы\s+)?не\s+(?:нужен|требуется|обязателен)",
    r"\bбез\s+опыта\b",
    r"\d{1,3}\s*(?:[-–]\s*\d{1,3}\s*)?(?:час\w*|минут\w*)\s+в\s+день",
    r"с\s+(?:вашего\s+|своего\s+)?(?:телефона|смартфона)",
)

# -- a document to review or sign, the reader's pay changing (phish28e) --------------------------
# What the salary-statement, payroll and "document shared" lures of 2024-2026 hand over (the
# quishing PDFs of "Q1 salary adjustment - review and sign", Outlook invitations to "review
# your 2026 salary statement", "индексация заработной платы: ознакомьтесь и подпишите"):
# a document, a statement, a contract or a voicemail to review, sign or open, or the reader's
# pay changing. A model feature and a hint (checks.document_lure): legitimate mail hands
# over documents every day; only where the way to them is hidden (a QR code in the attached
# file, a link in the calendar invitation and none in the letter) is it phishing. Kept out of
# the shared RE2 pass (its runs of words grew the set's automaton past its budget,
# wording.SET_MEMORY): this is its source, in Python's syntax; what runs is its own RE2
# pattern (:data:`_DOCUMENT_RE2`, :func:`find_document`), over a bounded text, only in a letter
# that carries a calendar invitation or is a short one with an image or a document attached.
DOCUMENT_LURE = _rx(
    r"\b(?:review|view|sign|open|access|download|acknowledge|e-?sign|approve)\s+(?:and\s+"
    r"(?:sign|acknowledge|approve|confirm)\s+)?(?:\w+\s+){0,3}?(?:documents?|statements?"
    r"|agreements?|contracts?|payslips?|paystubs?|pay\s+stubs?|handbook|voicemails?|voice\s+"
    r"messages?|fax)\b",
    r"\b(?:documents?|statements?|agreements?|contracts?|files?|payslips?)\s+(?:\w+\s+){0,2}?"
    r"(?:awaiting|pending|requires?|requiring|ready\s+for|waiting\s+for)\s+(?:your\s+)?"
    r"(?:signature|review|approval|acknowledg\w{0,10}+)",
    r"\bshared\s+(?:\w+\s+){0,3}?(?:documents?|files?|statements?|folders?|agreements?)\s+"
    r"with\s+you\b",
    r"\b(?:salary|pay|compensation|wage|bonus|payroll)\s+(?:adjustment|increase|raise|revision"
    r"|review|statement|change|update|letter|notice|confirmation)s?\b",
    r"(?:ознаком|подпиш|подпис|просмотр|откройте|открыть|скача|подтверд)\w{0,40}+\s+"
    r"(?:\w+\s+){0,3}?(?:документ|соглашени|договор|выписк|расчетн\w{0,40}+\s+лист|ведомост"
    r"|приказ|голосов\w{0,40}+\s+сообщени)\w*",
    r"(?:документ|файл|договор|соглашени|приказ)\w{0,40}+\s+(?:\w+\s+){0,3}?(?:на\s+подпис"
    r"|ожида\w{0,40}+\s+(?:вашей\s+)?подпис|для\s+ознакомлени|на\s+ознакомлени)\w*",
    r"(?:индексаци|повышени|пересмотр|изменени|перерасчет)\w{0,40}+\s+(?:\w+\s+)?(?:заработн"
    r"\w{0,40}+\s+плат|зарплат|оклад|преми)\w*",
)

_WORD = r"[\p{L}\p{N}_]"  # Python's \w on str, in RE2 (whose \w is ASCII)
DOCUMENT_MEMORY = 16 << 20
"""Bytes RE2 may spend on :data:`_DOCUMENT_RE2`: its program and its automaton's states. At 4
MiB the automaton gives up on a long text and RE2 falls back to its NFA (~0.5 ms per 1,000
characters), at 8 MiB or more it holds (~3 us per 1,000: review1)."""


def _re2_words(pattern: str) -> str:
    """``pattern`` (Python's syntax, as :data:`DOCUMENT_LURE`'s) for RE2: ``\\w`` as Unicode
    letters, digits and ``_``; a bounded possessive word tail (``\\w{0,40}+``, a guard of
    Python's backtracking) as an unbounded one, which RE2 reads in linear time anyway and
    which keeps the automaton small (a superset: a tail longer than 40 characters)."""
    out = pattern.replace("\\w{0,40}+", _WORD + "*").replace("\\w{0,10}+", _WORD + "*")
    out = out.replace("\\w", _WORD)
    if "}+" in out or "*+" in out or "++" in out or "(?=" in out or "(?!" in out:
        raise ValueError(f"no RE2 translation for {pattern[:40]!r}")
    return out


def _document_options() -> Any:
    options = re2.Options()
    options.never_capture = True
    options.max_mem = DOCUMENT_MEMORY
    options.log_errors = False
    return options


_DOCUMENT_RE2 = re2.compile(_re2_words(DOCUMENT_LURE.pattern).encode(), _document_options())


DOCUMENT_CONFIRM = 8  # matches beside a non-ASCII letter confirmed by Python's engine


def _word(c: str) -> bool:
    return c.isalnum() or c == "_"


def find_document(text: str, limit: int = 2) -> list[str]:
    """Quotes of :data:`DOCUMENT_LURE` in a folded ``text``, searched by RE2
    (:data:`_DOCUMENT_RE2`): linear in ``text``, which the caller bounds. RE2's ``\\b`` is
    ASCII, Python's is not: a match that begins after a Cyrillic letter (``ыreview``) is
    dropped, one that ends before it (``reviewы``) is confirmed by Python's engine at its
    start, at most :data:`DOCUMENT_CONFIRM` times a text."""
    data = text.encode("utf-8", "replace")  # a lone surrogate: "?", one character still
    out: list[str] = []
    confirmed = 0
    start = at = 0  # the characters before byte ``at``: counted once, not from 0 each match
    for m in _DOCUMENT_RE2.finditer(data):
        start += len(data[at : m.start()].decode())
        at = m.start()
        end = start + len(data[m.start() : m.end()].decode())
        if start > 0 and text[start].isascii() and _word(text[start - 1]):
            continue  # \b-led: Python's \b sees a word before
        if end < len(text) and _word(text[end]) and text[end - 1].isascii():
            if confirmed >= DOCUMENT_CONFIRM:
                break
            confirmed += 1
            exact = DOCUMENT_LURE.match(text, start)
            if exact is None:
                continue
            end = exact.end()
        q = wording.quote_span(text, start, end)
        if q and q not in out:
            out.append(q)
            if len(out) >= limit:
                break
    return out


QR = _rx(
    r"\bqr[- ]?(?:code|код)\w*",
    r"\bscan\s+(?:the\s+|this\s+)?(?:code|image|barcode)\b",
    r"отсканир\w*|сканируйте|наведите\s+камеру",
)
# A payment named beside a QR code in an attached document: an invoice's payment code (SBP,
# EPC, the Swiss QR-bill), which every invoice and its reminder may carry (review1).
QR_PAYMENT = _rx(
    r"\b(?:pay|paying|payment|invoices?|bills?)\b",
    r"\bоплат\w*|\bсч[её]т(?:а|у|ом|е|ов|ам)?\b|\bсбп\b|\bквитанци\w*",
)

for _rx_ in (
    ACCOUNT_LURE,
    FEE_REQUEST,
    MAIL_ROLE,
    ROLE,
    QR,
    CALLBACK_REASON,
    BEC_MONEY,
    BEC_GIFT,
    BEC_CODES,
    BEC_PAYMENT,
    BEC_HUSH,
    BEC_PRESS,
    BEC_SECRET,
    MESSENGER_CODE,
    TASK_JOB,
    TASK_PAY,
    TASK_RANGE,
    TASK_EASY,
    TASK_WORK,
    QR_PAYMENT,
):
    wording.register(_rx_)


def find(rx: re.Pattern[str], text: str, limit: int = 3) -> list[str]:
    """Quotes of ``rx`` in a folded ``text`` (:func:`wording.find_all`)."""
    return wording.find_all(rx, text, limit)


# -- invisible characters inside words ---------------------------------------------------------
# A zero-width or format character between two Latin or Cyrillic letters. Scripts that need
# joiners inside their words (Persian, the Indic ones) are left alone; so are emoji sequences
# and soft hyphens (newsletters put &shy; into long words so that they wrap).
_SPLIT = re2.compile(
    "[A-Za-z\u00c0-\u024f\u0400-\u04ff][\u200b-\u200d\u2060-\u2064\ufeff]+"
    "[A-Za-z\u00c0-\u024f\u0400-\u04ff]"
)


def split_words(text: str, limit: int = 3) -> list[str]:
    """Up to ``limit`` places where an invisible character splits a word, shown with the
    character named (``Pass[U+200B]word``)."""
    out: list[str] = []
    if text.isascii():  # the invisible characters are beyond ASCII
        return out
    for m in _SPLIT.finditer(text[:SPLIT_READ]):
        shown = "".join(c if c.isalpha() else f"[U+{ord(c):04X}]" for c in m.group(0))
        out.append(shown)
        if len(out) >= limit:
            break
    return out


def count_split(text: str, stop: int) -> int:
    """How many places an invisible character splits a word (counting stops at ``stop``)."""
    n = 0
    if text.isascii():  # the invisible characters are beyond ASCII
        return n
    for _ in _SPLIT.finditer(text[:SPLIT_READ]):
        n += 1
        if n >= stop:
            break
    return n


# -- HTML attachments --------------------------------------------------------------------------
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "image/svg+xml"})
HTML_EXTENSIONS = frozenset({"htm", "html", "shtml", "xhtml", "shtm", "svg", "mht", "mhtml"})
_FORM = re2.compile(r"(?i)<form\b|<input\b[^>]{0,400}\btype\s*=\s*[\"']?password")
_SCRIPT_ACTION = re2.compile(
    r"(?i)\b(?:window\.location|location\.(?:href|replace|assign)|document\.location"
    r"|\batob\s*\(|unescape\s*\(|fromCharCode|XMLHttpRequest|\bfetch\s*\(|\.submit\s*\(\s*\)"
    r"|document\.write\s*\(\s*(?:atob|unescape|decodeURI))"
)
_REFRESH = re2.compile(r"(?i)<meta\b[^>]{0,400}http-equiv\s*=\s*[\"']?refresh[^>]{0,400}url\s*=")


def is_html_file(filename: str | None, content_type: str) -> bool:
    name = (filename or "").strip().rstrip(". ").lower()
    ext = name.rpartition(".")[2] if "." in name else ""
    return ext in HTML_EXTENSIONS or content_type.lower() in HTML_TYPES


def html_attachment(content: bytes) -> list[str]:
    """What an attached HTML (or SVG) file does that a document does not: a form or a
    password field, a script that moves the reader or decodes a hidden page, an automatic
    redirect. Reads the first :data:`MAX_HTML_FILE` bytes."""
    text = content[:MAX_HTML_FILE].decode("utf-8", "replace")
    found: list[str] = []
    if _FORM.search(text):
        found.append("a form")
    m = _SCRIPT_ACTION.search(text)
    if m:
        found.append(f"a script: {m.group(0)[:40]}")
    if _REFRESH.search(text):
        found.append("an automatic redirect")
    return found
