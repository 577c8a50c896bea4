"""Real-looking sender records for offline SPF/DMARC tests and benchmarks/spf_suite.py.

Modelled on what large senders publish (include chains of netblocks, redirect to a shared
record, mx and a, ip6, several hops): the shapes are real, the addresses are the kind those
records list; nothing here is queried, it is served by FixtureResolver or a test DNS server.

``REAL_CASES``: (ip, MAIL FROM, HELO, expected SPF result) on ``REAL_ZONE``.
"""

from __future__ import annotations

REAL_ZONE: dict[str, dict[str, list[str]]] = {
    # an include chain three levels deep, ip4 and ip6 netblocks, ~all
    "gmail.com": {"TXT": ["v=spf1 redirect=_spf.google.com"]},
    "_spf.google.com": {
        "TXT": [
            "v=spf1 include:_netblocks.google.com include:_netblocks2.google.com"
            " include:_netblocks3.google.com ~all"
        ]
    },
    "_netblocks.google.com": {
        "TXT": [
            "v=spf1 ip4:35.190.247.0/24 ip4:64.233.160.0/19 ip4:66.102.0.0/20"
            " ip4:66.249.80.0/20 ip4:72.14.192.0/18 ip4:74.125.0.0/16 ip4:108.177.8.0/21"
            " ip4:173.194.0.0/16 ip4:209.85.128.0/17 ip4:216.58.192.0/19"
            " ip4:216.239.32.0/19 ~all"
        ]
    },
    "_netblocks2.google.com": {
        "TXT": [
            "v=spf1 ip6:2001:4860:4000::/36 ip6:2404:6800:4000::/36 ip6:2607:f8b0:4000::/36"
            " ip6:2800:3f0:4000::/36 ip6:2a00:1450:4000::/36 ip6:2c0f:fb50:4000::/36 ~all"
        ]
    },
    "_netblocks3.google.com": {
        "TXT": [
            "v=spf1 ip4:172.217.0.0/19 ip4:172.217.32.0/20 ip4:172.217.128.0/19"
            " ip4:172.217.160.0/20 ip4:172.217.192.0/19 ip4:172.253.56.0/21"
            " ip4:172.253.112.0/20 ip4:108.177.96.0/19 ip4:35.191.0.0/16 ip4:130.211.0.0/22"
            " ~all"
        ]
    },
    "_dmarc.gmail.com": {
        "TXT": ["v=DMARC1; p=none; sp=quarantine; rua=mailto:mailauth-reports@google.com"]
    },
    # a TXT record in two strings, -all, an include of a shared protection record
    "outlook.com": {"TXT": ["v=spf1 include:spf2.outlook.com -all"]},
    "spf2.outlook.com": {
        "TXT": [
            "v=spf1 ip4:40.92.0.0/15 ip4:40.107.0.0/16 ip4:52.100.0.0/15 ip4:52.102.0.0/16"
            " ip4:104.47.0.0/17 ip6:2a01:111:f400::/48 ip6:2a01:111:f403::/49 -all"
        ]
    },
    "_dmarc.outlook.com": {"TXT": ["v=DMARC1; p=none; pct=100; rua=mailto:d@rua.agari.com; fo=1"]},
    # redirect to a record with a: and netblocks; a strict DMARC policy
    "mail.ru": {"TXT": ["v=spf1 redirect=_spf.mail.ru"]},
    "_spf.mail.ru": {
        "TXT": [
            "v=spf1 a:mx1.mail.ru a:mx2.mail.ru ip4:217.69.128.0/20 ip4:94.100.176.0/20"
            " ip4:185.5.136.0/22 ip4:5.61.232.0/21 ~all"
        ]
    },
    "mx1.mail.ru": {"A": ["94.100.180.31"]},
    "mx2.mail.ru": {"A": ["217.69.139.150"]},
    "_dmarc.mail.ru": {"TXT": ["v=DMARC1; p=reject; rua=mailto:d@corp.mail.ru"]},
    # include of separate ipv4 and ipv6 records
    "yandex.ru": {"TXT": ["v=spf1 redirect=_spf.yandex.ru"]},
    "_spf.yandex.ru": {
        "TXT": ["v=spf1 include:_spf-ipv4.yandex.ru include:_spf-ipv6.yandex.ru ~all"]
    },
    "_spf-ipv4.yandex.ru": {
        "TXT": [
            "v=spf1 ip4:37.9.109.0/24 ip4:37.140.190.0/23 ip4:77.88.0.0/18"
            " ip4:87.250.224.0/19 ip4:93.158.128.0/18 ip4:95.108.128.0/17"
            " ip4:141.8.128.0/18 ip4:178.154.128.0/18 ip4:213.180.192.0/19 ~all"
        ]
    },
    "_spf-ipv6.yandex.ru": {"TXT": ["v=spf1 ip6:2a02:6b8::/32 ip6:2a0e:fd87::/32 ~all"]},
    "_dmarc.yandex.ru": {"TXT": ["v=DMARC1; p=none"]},
    # a government sender: mx, a, a fixed network, -all; the subdomain's own record
    "gosuslugi.ru": {
        "TXT": ["v=spf1 mx a ip4:109.207.0.0/20 -all", "yandex-verification: 0f1e2d3c4b5a"],
        "MX": ["mx1.gosuslugi.ru", "mx2.gosuslugi.ru"],
        "A": ["109.207.1.97"],
    },
    "mx1.gosuslugi.ru": {"A": ["109.207.1.118"]},
    "mx2.gosuslugi.ru": {"A": ["213.59.254.8"]},
    "_dmarc.gosuslugi.ru": {"TXT": ["v=DMARC1; p=reject; sp=reject; adkim=s; aspf=r"]},
    # an ESP sending for a shop: the shop includes the ESP, exists: with macros
    "shop.example": {"TXT": ["v=spf1 include:sendgrid.net include:_spf.esp.example -all"]},
    "sendgrid.net": {"TXT": ["v=spf1 ip4:167.89.0.0/17 ip4:149.72.0.0/16 ~all"]},
    "_spf.esp.example": {"TXT": ["v=spf1 exists:%{i}._spf.esp.example -all"]},
    "198.51.100.77._spf.esp.example": {"A": ["127.0.0.2"]},
    "_dmarc.shop.example": {"TXT": ["v=DMARC1; p=quarantine; pct=25"]},
}

REAL_CASES: list[tuple[str, str, str, str]] = [
    ("209.85.220.41", "someone@gmail.com", "mail-sor-f41.google.com", "pass"),
    ("2a00:1450:4864:20::52f", "someone@gmail.com", "mail-ed1-x52f.google.com", "pass"),
    ("203.0.113.9", "someone@gmail.com", "forger.example", "softfail"),
    ("40.92.18.99", "user@outlook.com", "EUR05-AM6-obe.outbound.protection.outlook.com", "pass"),
    ("203.0.113.9", "user@outlook.com", "forger.example", "fail"),
    ("94.100.180.31", "user@mail.ru", "mx1.mail.ru", "pass"),
    ("217.69.139.151", "user@mail.ru", "smtp.mail.ru", "pass"),
    ("203.0.113.9", "user@mail.ru", "forger.example", "softfail"),
    ("77.88.21.158", "robot@yandex.ru", "forward500a.mail.yandex.net", "pass"),
    ("2a02:6b8:c0c:1::1", "robot@yandex.ru", "forward101a.mail.yandex.net", "pass"),
    ("213.59.254.8", "no-reply@gosuslugi.ru", "mx2.gosuslugi.ru", "pass"),
    ("109.207.1.97", "no-reply@gosuslugi.ru", "gosuslugi.ru", "pass"),
    ("109.207.13.1", "no-reply@gosuslugi.ru", "out.gosuslugi.ru", "pass"),
    ("203.0.113.9", "no-reply@gosuslugi.ru", "gosuslugi.ru.forger.example", "fail"),
    ("167.89.12.3", "orders@shop.example", "o1.sendgrid.net", "pass"),
    ("198.51.100.77", "orders@shop.example", "out.esp.example", "pass"),
    ("198.51.100.78", "orders@shop.example", "out.esp.example", "fail"),
    ("203.0.113.9", "orders@shop.example", "forger.example", "fail"),
]
