-- The code-host webhook (issue 35; SQLite: its migration 0016, which says
-- what each table is for).
CREATE TABLE codehost_deliveries (
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    delivery_id TEXT NOT NULL,
    digest      TEXT NOT NULL UNIQUE,
    event_id    TEXT NOT NULL,
    event       TEXT NOT NULL,
    received_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, delivery_id)
);
CREATE INDEX codehost_deliveries_received ON codehost_deliveries (received_at);

CREATE TABLE codehost_webhook_secrets (
    tenant_id  TEXT PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
    secret     TEXT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
