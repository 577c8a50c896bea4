"""Protocol edges: HTTP (FastAPI) now; SMTP/LMTP later. Edges translate, never decide."""
