-- Learned words (pochta.antispam.words.postgres): one table per owner, 0 the installation,
-- else an account's id; hash the word's 64-bit hash as signed bigint; day its last day seen.
CREATE TABLE pochta.learned_words (
    owner bigint NOT NULL,
    hash bigint NOT NULL,
    spam bigint NOT NULL,
    ham bigint NOT NULL,
    day integer NOT NULL,
    PRIMARY KEY (owner, hash)
);
CREATE INDEX learned_words_by_day ON pochta.learned_words (owner, day);
CREATE TABLE pochta.learned_totals (
    owner bigint PRIMARY KEY,
    spam bigint NOT NULL,
    ham bigint NOT NULL
);

-- The admin pages' history (pochta.history.postgres): every loader adds to the same rows.
CREATE TABLE pochta.history_samples (
    at double precision NOT NULL,
    letters bigint NOT NULL,
    logical_bytes bigint NOT NULL,
    stored_bytes bigint NOT NULL,
    physical_bytes bigint NOT NULL
);
CREATE INDEX history_samples_by_time ON pochta.history_samples (at);
CREATE TABLE pochta.history_tallies (
    series text NOT NULL,
    hour bigint NOT NULL,
    name text NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (series, hour, name)
);
CREATE INDEX history_tallies_by_hour ON pochta.history_tallies (hour);
CREATE TABLE pochta.history_audits (
    at double precision NOT NULL,
    lines bigint NOT NULL,
    malformed bigint NOT NULL,
    unknown bigint NOT NULL,
    wrong bigint NOT NULL,
    valid bigint NOT NULL,
    reset bigint NOT NULL,
    seconds double precision NOT NULL
);
CREATE INDEX history_audits_by_time ON pochta.history_audits (at);
