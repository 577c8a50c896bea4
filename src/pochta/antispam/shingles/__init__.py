"""Shingles of letters and the counters kept for them (seed 002).

``registry`` (the stable type numbers, 64-bit hashes) and the extraction are pure;
``counters`` holds the buckets arithmetic, the write buffer and the stores; ``shingler.Shingler``
is what the mailbox API, the HTTP API and the CLI call.
"""
