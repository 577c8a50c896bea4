"""pochta: the storage and protection core of a mail service."""

__version__ = "0.1.0"
