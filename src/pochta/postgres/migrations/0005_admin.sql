-- The admin role (the webmail's /admin pages; `pochta user add --admin`, `pochta user admin`).
ALTER TABLE pochta.users ADD COLUMN admin boolean NOT NULL DEFAULT false;
