-- Rolls migration 0018 (the inline MCP proxy) back: the MCP servers'
-- sealed upstream credentials and the installation's secrets are dropped
-- (the older binary has no proxy, and presents no credentials upstream),
-- and so is the index of approvals by agent and action hash. Run it with
-- every gateway on this database stopped, before any older rollback script:
--
--     sqlite3 svc.db < persistence/sqlite/rollback/0018_mcp_proxy.sql
BEGIN IMMEDIATE;
DROP TABLE installation_secrets;
ALTER TABLE mcp_servers DROP COLUMN upstream_auth;
ALTER TABLE mcp_tools DROP COLUMN read_only;
DROP INDEX approvals_usable;
DELETE FROM schema_migrations WHERE version = 18;
COMMIT;
