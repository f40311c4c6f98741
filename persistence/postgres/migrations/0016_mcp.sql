-- The MCP registry (CONTRACT §8, issue 26): a tenant's MCP servers, the
-- tools their last discovery found, and the drift history.
--
-- pinned_hash is the manifest hash drift is measured against ('' before
-- the first discovery, which pins it); manifest_hash is what the last
-- discovery found. revision grows with every change: advancing it is how
-- a change takes the server first, so two discoveries of one server, or a
-- discovery and a tool approval, commit one after the other.
CREATE TABLE mcp_servers (
    tenant_id            TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    server_key           TEXT NOT NULL,
    transport            TEXT NOT NULL CHECK (transport IN ('http', 'stdio')),
    url                  TEXT NOT NULL DEFAULT '',
    trust_level          TEXT NOT NULL,
    inspection_enabled   BOOLEAN NOT NULL DEFAULT FALSE,
    status               TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'quarantined')),
    pinned_hash          TEXT NOT NULL DEFAULT '',
    manifest_hash        TEXT NOT NULL DEFAULT '',
    last_discovery_at    TIMESTAMPTZ,
    last_discovery_error TEXT NOT NULL DEFAULT '',
    revision             BIGINT NOT NULL DEFAULT 1,
    created_at           TIMESTAMPTZ NOT NULL,
    updated_at           TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, server_key)
);

-- tool_key is the tool's name normalized as an authorize call's action is
-- (the lookup key); name is the server's spelling. findings: the
-- poisoning scan's categories and counts, never the text.
CREATE TABLE mcp_tools (
    tenant_id    TEXT NOT NULL,
    server_key   TEXT NOT NULL,
    tool_key     TEXT NOT NULL,
    name         TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'disabled')),
    description  TEXT NOT NULL DEFAULT '',
    input_schema TEXT NOT NULL,
    tool_hash    TEXT NOT NULL,
    findings     TEXT NOT NULL DEFAULT '[]',
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, server_key, tool_key),
    FOREIGN KEY (tenant_id, server_key) REFERENCES mcp_servers (tenant_id, server_key) ON DELETE CASCADE
);

CREATE TABLE mcp_manifest_history (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id            TEXT NOT NULL UNIQUE,
    tenant_id     TEXT NOT NULL,
    server_key    TEXT NOT NULL,
    discovered_at TIMESTAMPTZ NOT NULL,
    manifest_hash TEXT NOT NULL,
    pinned_hash   TEXT NOT NULL,
    added         TEXT NOT NULL,
    removed       TEXT NOT NULL,
    changed       TEXT NOT NULL,
    risk_score    INTEGER NOT NULL,
    findings      TEXT NOT NULL,
    event_id      TEXT NOT NULL,
    FOREIGN KEY (tenant_id, server_key) REFERENCES mcp_servers (tenant_id, server_key) ON DELETE CASCADE
);
CREATE INDEX mcp_manifest_history_server ON mcp_manifest_history (tenant_id, server_key, seq);
