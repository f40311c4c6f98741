-- Rolls migration 0014 (the MCP registry) back: the registered MCP
-- servers, their tools and their drift history are dropped. Run it with
-- every gateway on this database stopped, before any older rollback script:
--
--     sqlite3 svc.db < persistence/sqlite/rollback/0014_mcp.sql
BEGIN IMMEDIATE;
DROP INDEX mcp_manifest_history_server;
DROP TABLE mcp_manifest_history;
DROP TABLE mcp_tools;
DROP TABLE mcp_servers;
DELETE FROM schema_migrations WHERE version = 14;
COMMIT;
