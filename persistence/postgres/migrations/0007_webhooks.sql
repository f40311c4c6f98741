-- Webhook export subscriptions (SPEC 6.5, CONTRACT §7).
-- delivery_secret is the HMAC-SHA256 key that signs every delivery: it is
-- kept as issued because signing needs it (it is shown to the operator only
-- once, at creation). delivery_status follows consecutive_failures (healthy
-- at 0, degraded from 1 to 9, dead from 10); both change together in one
-- conditional UPDATE per delivery result. revision grows with every update,
-- and a delivery result counts only against the revision it started with.
CREATE TABLE webhook_subscriptions (
    seq                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id                   TEXT NOT NULL UNIQUE,
    tenant_id            TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    url                  TEXT NOT NULL,
    min_severity         TEXT NOT NULL CHECK (min_severity IN ('info', 'high')),
    format               TEXT NOT NULL CHECK (format IN ('json', 'cef')),
    enabled              BOOLEAN NOT NULL DEFAULT TRUE,
    delivery_secret      TEXT NOT NULL,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    delivery_status      TEXT NOT NULL DEFAULT 'healthy' CHECK (delivery_status IN ('healthy', 'degraded', 'dead')),
    revision             BIGINT NOT NULL DEFAULT 1,
    created_at           TIMESTAMPTZ NOT NULL,
    updated_at           TIMESTAMPTZ NOT NULL,
    last_delivery_at     TIMESTAMPTZ
);
CREATE INDEX webhook_subscriptions_tenant ON webhook_subscriptions (tenant_id, seq);
