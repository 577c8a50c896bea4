"""Antispam: shingles of letters and the counters kept for them (seed 002).

``shingles`` (registry, extraction, 64-bit hashes) and ``normalize`` are pure; ``counters``
holds the buckets arithmetic, the write buffer and the stores; ``shingler.Shingler`` is what
delivery, the mailbox API, the HTTP API and the CLI call.
"""
