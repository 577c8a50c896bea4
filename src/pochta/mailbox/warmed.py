"""What every letter worker reads, built once in the fork server that forks them.

The letters' pool preloads this module (``pochta.mailbox.intake.POOL_MODULES``): the fork
server imports it once, before it forks a worker, so each worker (and each replacement of a
worker killed at its deadline) starts with the format characters' tables and the public
suffix list already built (:func:`pochta.mime.normalize.warm`: ~0.2 s of CPU otherwise spent
by every worker), and shares their pages with its siblings. ``init_pool_process`` calls the
same function again, which then does nothing; nothing else imports this module.
"""

from __future__ import annotations

from pochta.mime import normalize

normalize.warm()
