"""Protocol edges: SMTP/LMTP (aiosmtpd), IMAP, and HTTP (FastAPI: the API, webmail, admin).
Edges translate, never decide."""
