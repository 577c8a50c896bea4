"""The HTTP API's route modules and what they share, named for what they serve: ``mailbox``
(``/v1/folders``, letters, sessions), ``blobs`` (``/v1/blobs``), ``lists`` (sender lists),
``shingles`` (the shingle counters), ``scan`` (``POST /v1/scan``), ``metrics``
(``GET /metrics``), ``errors`` (the error bodies and their statuses) and ``limits`` (the
bounds of a request's body and head). Moved here from ``pochta.server`` by issue 31, so that
their names no longer read as the domain packages they serve (``pochta.mailbox``,
``pochta.blobs``, ``pochta.errors``, ``pochta.metrics``)."""
