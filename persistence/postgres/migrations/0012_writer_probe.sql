-- One row the group writer rewrites, while its commits fail, to learn when
-- writes succeed again (so /readyz recovers without waiting for traffic).
CREATE TABLE writer_probe (
    id        INTEGER PRIMARY KEY,
    probed_at TEXT NOT NULL
);
