-- Rolls migration 0016 (the MCP registry) back: the registered MCP
-- servers, their tools and their drift history are dropped. Run it with
-- every gateway on this database stopped, before any older rollback script:
--
--     psql "$DATABASE_URL" -f persistence/postgres/rollback/0016_mcp.sql
BEGIN;
DROP INDEX mcp_manifest_history_server;
DROP TABLE mcp_manifest_history;
DROP TABLE mcp_tools;
DROP TABLE mcp_servers;
DELETE FROM schema_migrations WHERE version = 16;
COMMIT;
