-- The code-host webhook (issue 35).
--
-- codehost_deliveries: the deliveries accepted (turned into an event) in
-- the last 72 hours, the replay window; older rows are deleted by the next
-- claim. A delivery id is accepted once per tenant (the primary key), and
-- a signed body once in all (digest: the SHA-256 of its verified
-- signature), so a retry is recognised and a replay under a fresh id, or
-- into another tenant, is refused on every node.
CREATE TABLE codehost_deliveries (
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    delivery_id TEXT NOT NULL,
    digest      TEXT NOT NULL UNIQUE,
    event_id    TEXT NOT NULL,
    event       TEXT NOT NULL,
    received_at TEXT NOT NULL,
    PRIMARY KEY (tenant_id, delivery_id)
);
CREATE INDEX codehost_deliveries_received ON codehost_deliveries (received_at);

-- codehost_webhook_secrets: a tenant's own webhook secret (PATCH
-- /v1/tenants/settings); once set, the only one that tenant's deliveries
-- are verified with. Stored as given: an HMAC key must be readable to
-- verify, like a webhook subscription's delivery secret.
CREATE TABLE codehost_webhook_secrets (
    tenant_id  TEXT PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    secret     TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
