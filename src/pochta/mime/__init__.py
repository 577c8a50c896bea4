"""Letters as MIME: parsed once into a :class:`~pochta.mime.letter.Letter` that everything
else reads (:mod:`~pochta.mime.letter`, with one HTML reader in :mod:`~pochta.mime.html` and
names normalized in :mod:`~pochta.mime.normalize`), split into a skeleton + attachments and
reassembled byte for byte (:mod:`~pochta.mime.split`). Pure functions: no I/O.
"""

from pochta.mime.letter import Address, Attachment, Letter, Link, parse
from pochta.mime.skeleton import Ref
from pochta.mime.split import Extracted, Split, iter_reassemble, reassemble, refs, split

__all__ = [
    "Address",
    "Attachment",
    "Extracted",
    "Letter",
    "Link",
    "Ref",
    "Split",
    "iter_reassemble",
    "parse",
    "reassemble",
    "refs",
    "split",
]
