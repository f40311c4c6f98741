-- The inline MCP proxy (CONTRACT §15).
--
-- approvals_usable: the proxy finds the approval a repeated call may
-- consume by its agent and action hash, newest first (the approval id is
-- not in the MCP call).
--
-- mcp_servers.upstream_auth: the credentials the gateway presents to the
-- upstream server, sealed (encrypted) by the gateway before they are
-- written; NULL for none.
--
-- mcp_tools.read_only: the tool's annotations.readOnlyHint as discovered:
-- a proxied call of it is authorized with mutates_state false.
--
-- installation_secrets: secrets of the installation itself, not of a
-- tenant (no tenant column, untouched by a tenant's deletion): written once
-- by the first node that needs one (INSERT ... ON CONFLICT DO NOTHING), then
-- read by every node sharing the database, so that all use the same bytes.
CREATE INDEX approvals_usable ON approvals (tenant_id, agent_id, action_hash, seq);

ALTER TABLE mcp_servers ADD COLUMN upstream_auth BLOB;

ALTER TABLE mcp_tools ADD COLUMN read_only INTEGER NOT NULL DEFAULT 0;

CREATE TABLE installation_secrets (
    name       TEXT PRIMARY KEY,
    value      BLOB NOT NULL,
    created_at TEXT NOT NULL
);
