"""Sender authentication: SPF (``spf``), DKIM and DMARC (``results``) behind a DNS
``resolver`` (the system's, or an offline fixture for tests)."""
