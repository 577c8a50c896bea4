-- Personal sender lists (pochta.mailbox.lists): each account's "allow" / "block" entries, an
-- address or a domain, normalized; one action per value. No foreign key to pochta.users:
-- deleting an account calls the store's forget (as for the SQLite store).
CREATE TABLE pochta.sender_lists (
    user_id bigint NOT NULL,
    value text NOT NULL CHECK (length(value) <= 254),
    action text NOT NULL CHECK (action IN ('allow', 'block')),
    PRIMARY KEY (user_id, value)
);
