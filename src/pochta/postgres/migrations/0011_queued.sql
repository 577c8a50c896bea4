-- The incoming queue's entries whose delivery was made (smtp.answer = "queued",
-- mailbox/queuerunner.py): recorded in the delivery's own transaction, so that a queue file a crash
-- left behind after the delivery is recognised and not delivered twice. Forgotten after
-- queue.remember_days.
CREATE TABLE pochta.queued (
    id text PRIMARY KEY,
    at double precision NOT NULL
);
CREATE INDEX queued_by_time ON pochta.queued (at);
