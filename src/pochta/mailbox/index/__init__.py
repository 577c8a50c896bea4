"""The mail index's engines (``pochta.types.MailIndex``: users, folders, letters, skeletons,
attachment references), one file per engine as every port's:

    sqlite.py     SQLiteIndex: WAL, one writer with group commit; the embedded default
    postgres.py   PostgresIndex: several ``pochta serve`` processes share one mailbox

Both pass ``tests/contract/test_mailbox_index.py``; ``pochta.app`` picks one
(``mailbox.backend``). The index is behind ``pochta.mailbox.service.Mailbox``: the edges never
import it (``tests/unit/test_imports.py``).
"""
