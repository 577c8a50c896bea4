-- The spam model's versions and the promotions (pochta.antispam.model.store.postgres): with
-- [postgres], `pochta model train / promote / rollback` write here and every loader of every
-- machine reads the live version from here.
CREATE TABLE pochta.model_versions (
    version text PRIMARY KEY,
    created double precision NOT NULL
);
CREATE TABLE pochta.model_files (
    version text NOT NULL REFERENCES pochta.model_versions (version) ON DELETE CASCADE,
    name text NOT NULL,
    body bytea NOT NULL,
    PRIMARY KEY (version, name)
);
CREATE TABLE pochta.model_promotions (
    seq bigserial PRIMARY KEY,
    version text NOT NULL REFERENCES pochta.model_versions (version),
    at double precision NOT NULL DEFAULT extract(epoch FROM now())
);
