"""The mailbox: index store, delivery, deletion, checks."""
