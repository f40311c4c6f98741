-- The inline MCP proxy (CONTRACT §15; SQLite: its migration 0018, which
-- says what each change is for).
CREATE INDEX approvals_usable ON approvals (tenant_id, agent_id, action_hash, seq);

ALTER TABLE mcp_servers ADD COLUMN upstream_auth BYTEA;

ALTER TABLE mcp_tools ADD COLUMN read_only BOOLEAN NOT NULL DEFAULT false;

CREATE TABLE installation_secrets (
    name       TEXT PRIMARY KEY,
    value      BYTEA NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
