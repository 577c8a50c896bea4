"""The mailbox: index store, and the rooms behind ``service.Mailbox`` (accounts, delivery,
reading, deletion, journal, checks)."""
