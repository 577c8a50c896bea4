"""Letters as MIME: split into a skeleton + attachments and reassembled byte for byte
(:mod:`~pochta.mime.split`), and summarized for display and indexing
(:mod:`~pochta.mime.summary`). Pure functions: no I/O.
"""

from pochta.mime.skeleton import Ref
from pochta.mime.split import Extracted, Split, iter_reassemble, reassemble, refs, split
from pochta.mime.summary import Address, Attachment, Summary, summarize

__all__ = [
    "Address",
    "Attachment",
    "Extracted",
    "Ref",
    "Split",
    "Summary",
    "iter_reassemble",
    "reassemble",
    "refs",
    "split",
    "summarize",
]
