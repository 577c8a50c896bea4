"""Phishing signs (seed 000): each a named symbol with a Russian and an English explanation.

``registry`` lists the signs; ``checks`` finds them in a parsed letter, reading what
``wording`` (phrase families), ``lookalike`` (confusable characters), ``protected`` (the
organizations fraudsters imitate; the shipped lists of URL shorteners, redirect and
click-tracking hosts, abused TLDs), ``links`` (what a link shows, carries and hides),
``extortion`` (wallets, gift cards, demands) and ``attachments`` (dangerous files) say.
"""
