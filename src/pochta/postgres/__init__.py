"""PostgreSQL for pochta's metadata: a connection pool (``database``), schema migrations
(``migrate`` and the numbered files in ``migrations/``). Group commit, which FileDB uses on
both engines, is ``pochta.blobs.filedb.group``.

The stores kept there live beside their embedded twins: ``pochta.blobs.filedb.postgres``,
``pochta.blobs.pairs.postgres``, ``pochta.blobs.valkyrie.state.postgres``,
``pochta.mailbox.index.postgres``.
Every table is in the ``pochta`` schema of the configured database.
"""
