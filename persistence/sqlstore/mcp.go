package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"svc/persistence"
)

// ---- the MCP registry (CONTRACT §8) ----

const mcpServerCols = `tenant_id, server_key, transport, url, trust_level, inspection_enabled, status, pinned_hash, manifest_hash,
	last_discovery_at, last_discovery_error, upstream_auth, revision, created_at, updated_at`

func scanMCPServer(r Row) (persistence.MCPServer, error) {
	var s persistence.MCPServer
	err := r.Scan(&s.TenantID, &s.Key, &s.Transport, &s.URL, &s.TrustLevel, &s.InspectionEnabled, &s.Status, &s.PinnedHash,
		&s.ManifestHash, NullTime{&s.LastDiscoveryAt}, &s.LastDiscoveryError, &s.UpstreamAuth, &s.Revision, Time{&s.CreatedAt}, Time{&s.UpdatedAt})
	if IsNoRows(err) {
		return s, persistence.ErrNotFound
	}
	if len(s.UpstreamAuth) == 0 {
		s.UpstreamAuth = nil
	}
	return s, err
}

// upstreamAuth is the upstream_auth column's value: NULL for none.
func upstreamAuth(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

func getMCPServer(ctx context.Context, q Querier, tenantID, key string) (persistence.MCPServer, error) {
	return scanMCPServer(q.QueryRow(ctx, `SELECT `+mcpServerCols+` FROM mcp_servers WHERE tenant_id = $1 AND server_key = $2`, tenantID, key))
}

// CreateMCPServer implements persistence.MCPStore. With a limit, the
// tenant's row is locked first (an update that changes nothing: Postgres
// takes the row lock, which does not hold back the inserts that refer to
// the tenant; SQLite's one writer serializes anyway), so that two
// creations, on any nodes, count one after the other; the new server is
// counted with the others.
func (s *Store) CreateMCPServer(ctx context.Context, srv persistence.MCPServer, limit int, audit ...persistence.AuditEvent) (persistence.MCPServer, error) {
	t := now()
	var out persistence.MCPServer
	err := s.DB.Tx(ctx, func(q Querier) error {
		if limit > 0 {
			if _, err := q.Exec(ctx, `UPDATE tenants SET auto_rotate_token_on_leak = auto_rotate_token_on_leak WHERE id = $1`, srv.TenantID); err != nil {
				return err
			}
		}
		if _, err := q.Exec(ctx, `INSERT INTO mcp_servers (tenant_id, server_key, transport, url, trust_level, inspection_enabled, status,
			upstream_auth, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)`,
			srv.TenantID, srv.Key, srv.Transport, srv.URL, srv.TrustLevel, srv.InspectionEnabled, persistence.MCPServerActive,
			upstreamAuth(srv.UpstreamAuth), t); err != nil {
			return err
		}
		if limit > 0 {
			var n int
			if err := q.QueryRow(ctx, `SELECT count(*) FROM mcp_servers WHERE tenant_id = $1`, srv.TenantID).Scan(&n); err != nil {
				return err
			}
			if n > limit {
				return persistence.ErrMCPServerLimit
			}
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		var err error
		out, err = getMCPServer(ctx, q, srv.TenantID, srv.Key)
		return err
	})
	return out, err
}

// GetMCPServer implements persistence.MCPStore.
func (s *Store) GetMCPServer(ctx context.Context, tenantID, key string) (persistence.MCPServer, error) {
	return getMCPServer(ctx, s.DB.Reader(), tenantID, key)
}

// ListMCPServers implements persistence.MCPStore.
func (s *Store) ListMCPServers(ctx context.Context, tenantID string) ([]persistence.MCPServer, error) {
	rows, err := s.DB.Replica().Query(ctx, `SELECT `+mcpServerCols+` FROM mcp_servers WHERE tenant_id = $1 ORDER BY server_key`, tenantID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanMCPServer)
}

// ListAllMCPServers implements persistence.MCPStore.
func (s *Store) ListAllMCPServers(ctx context.Context, transport string) ([]persistence.MCPServer, error) {
	rows, err := s.DB.Reader().Query(ctx, `SELECT `+mcpServerCols+` FROM mcp_servers WHERE transport = $1 ORDER BY tenant_id, server_key`, transport)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanMCPServer)
}

// lockMCPServer advances the server's revision, which takes its row lock
// (Postgres; SQLite's writer holds the database) so that changes to one
// server and its tools commit one after the other, and returns the row.
func lockMCPServer(ctx context.Context, q Querier, tenantID, key string, at time.Time) (persistence.MCPServer, error) {
	n, err := q.Exec(ctx, `UPDATE mcp_servers SET revision = revision + 1, updated_at = $1 WHERE tenant_id = $2 AND server_key = $3`, at, tenantID, key)
	if err != nil {
		return persistence.MCPServer{}, err
	}
	if n == 0 {
		return persistence.MCPServer{}, persistence.ErrNotFound
	}
	return getMCPServer(ctx, q, tenantID, key)
}

// UpdateMCPServer implements persistence.MCPStore.
func (s *Store) UpdateMCPServer(ctx context.Context, tenantID, key string, p persistence.MCPServerPatch, audit ...persistence.AuditEvent) (persistence.MCPServer, error) {
	var out persistence.MCPServer
	err := s.DB.Tx(ctx, func(q Querier) error {
		t := now()
		cur, err := lockMCPServer(ctx, q, tenantID, key, t)
		if err != nil {
			return err
		}
		if p.StatusFrom != nil && !slices.Contains(p.StatusFrom, cur.Status) {
			return persistence.ErrStateConflict
		}
		if p.Pin && cur.ManifestHash == "" {
			return persistence.ErrStateConflict
		}
		if p.URL != nil {
			cur.URL = *p.URL
		}
		if p.TrustLevel != nil {
			cur.TrustLevel = *p.TrustLevel
		}
		if p.InspectionEnabled != nil {
			cur.InspectionEnabled = *p.InspectionEnabled
		}
		if p.Status != nil {
			cur.Status = *p.Status
		}
		if p.Pin {
			cur.PinnedHash = cur.ManifestHash
		}
		if p.UpstreamAuth != nil {
			cur.UpstreamAuth = *p.UpstreamAuth
		}
		if _, err := q.Exec(ctx, `UPDATE mcp_servers SET url = $1, trust_level = $2, inspection_enabled = $3, status = $4, pinned_hash = $5,
			upstream_auth = $6 WHERE tenant_id = $7 AND server_key = $8`, cur.URL, cur.TrustLevel, cur.InspectionEnabled, cur.Status,
			cur.PinnedHash, upstreamAuth(cur.UpstreamAuth), tenantID, key); err != nil {
			return err
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		out, err = getMCPServer(ctx, q, tenantID, key)
		return err
	})
	return out, err
}

// DeleteMCPServer implements persistence.MCPStore (its tools and history
// go with it).
func (s *Store) DeleteMCPServer(ctx context.Context, tenantID, key string, audit ...persistence.AuditEvent) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		for _, table := range []string{"mcp_tools", "mcp_manifest_history"} {
			if _, err := q.Exec(ctx, `DELETE FROM `+table+` WHERE tenant_id = $1 AND server_key = $2`, tenantID, key); err != nil {
				return err
			}
		}
		n, err := q.Exec(ctx, `DELETE FROM mcp_servers WHERE tenant_id = $1 AND server_key = $2`, tenantID, key)
		if err != nil {
			return err
		}
		if n == 0 {
			return persistence.ErrNotFound
		}
		return s.insertAudit(ctx, q, audit)
	})
}

const mcpToolCols = `tenant_id, server_key, tool_key, name, status, description, input_schema, tool_hash, findings, read_only, created_at, updated_at`

func scanMCPTool(r Row) (persistence.MCPTool, error) {
	var t persistence.MCPTool
	var schema, findings string
	err := r.Scan(&t.TenantID, &t.ServerKey, &t.Key, &t.Name, &t.Status, &t.Description, &schema, &t.Hash, &findings, &t.ReadOnly,
		Time{&t.CreatedAt}, Time{&t.UpdatedAt})
	if IsNoRows(err) {
		return t, persistence.ErrNotFound
	}
	if err != nil {
		return t, err
	}
	t.InputSchema = json.RawMessage(schema)
	if err := json.Unmarshal([]byte(findings), &t.Findings); err != nil {
		return t, fmt.Errorf("sqlstore: mcp tool findings: %w", err)
	}
	return t, nil
}

func listMCPTools(ctx context.Context, q Querier, tenantID, serverKey string) ([]persistence.MCPTool, error) {
	rows, err := q.Query(ctx, `SELECT `+mcpToolCols+` FROM mcp_tools WHERE tenant_id = $1 AND server_key = $2 ORDER BY name`, tenantID, serverKey)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanMCPTool)
}

// ListMCPTools implements persistence.MCPStore.
func (s *Store) ListMCPTools(ctx context.Context, tenantID, serverKey string) ([]persistence.MCPTool, error) {
	return listMCPTools(ctx, s.DB.Reader(), tenantID, serverKey)
}

// GetMCPTool implements persistence.MCPStore.
func (s *Store) GetMCPTool(ctx context.Context, tenantID, serverKey, toolKey string) (persistence.MCPTool, error) {
	return scanMCPTool(s.DB.Reader().QueryRow(ctx, `SELECT `+mcpToolCols+` FROM mcp_tools WHERE tenant_id = $1 AND server_key = $2
		AND tool_key = $3`, tenantID, serverKey, toolKey))
}

// SetMCPToolStatus implements persistence.MCPStore.
func (s *Store) SetMCPToolStatus(ctx context.Context, tenantID, serverKey, toolKey string, from []string, to string,
	audit ...persistence.AuditEvent) (persistence.MCPTool, error) {
	var out persistence.MCPTool
	err := s.DB.Tx(ctx, func(q Querier) error {
		if _, err := lockMCPServer(ctx, q, tenantID, serverKey, now()); err != nil {
			return err
		}
		cur, err := scanMCPTool(q.QueryRow(ctx, `SELECT `+mcpToolCols+` FROM mcp_tools WHERE tenant_id = $1 AND server_key = $2
			AND tool_key = $3`, tenantID, serverKey, toolKey))
		if err != nil {
			return err
		}
		if !slices.Contains(from, cur.Status) {
			return persistence.ErrStateConflict
		}
		if _, err := q.Exec(ctx, `UPDATE mcp_tools SET status = $1, updated_at = $2 WHERE tenant_id = $3 AND server_key = $4 AND tool_key = $5`,
			to, now(), tenantID, serverKey, toolKey); err != nil {
			return err
		}
		if err := s.insertAudit(ctx, q, audit); err != nil {
			return err
		}
		cur.Status = to
		out = cur
		return nil
	})
	return out, err
}

// ApplyMCPDiscovery implements persistence.MCPStore.
func (s *Store) ApplyMCPDiscovery(ctx context.Context, tenantID, serverKey string, plan persistence.MCPDiscoveryPlan) (persistence.MCPServer,
	*persistence.MCPManifestEntry, error) {
	var out persistence.MCPServer
	var entry *persistence.MCPManifestEntry
	err := s.DB.Tx(ctx, func(q Querier) error {
		t := now()
		cur, err := lockMCPServer(ctx, q, tenantID, serverKey, t)
		if err != nil {
			return err
		}
		tools, err := listMCPTools(ctx, q, tenantID, serverKey)
		if err != nil {
			return err
		}
		d, err := plan(cur, tools)
		if err != nil {
			return err
		}
		for _, key := range d.Delete {
			if _, err := q.Exec(ctx, `DELETE FROM mcp_tools WHERE tenant_id = $1 AND server_key = $2 AND tool_key = $3`, tenantID, serverKey, key); err != nil {
				return err
			}
		}
		for _, tool := range d.Upsert {
			findings, err := json.Marshal(orEmpty(tool.Findings))
			if err != nil {
				return err
			}
			if _, err := q.Exec(ctx, `INSERT INTO mcp_tools (`+mcpToolCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)
				ON CONFLICT (tenant_id, server_key, tool_key) DO UPDATE SET name = excluded.name, status = excluded.status,
				description = excluded.description, input_schema = excluded.input_schema, tool_hash = excluded.tool_hash,
				findings = excluded.findings, read_only = excluded.read_only, updated_at = excluded.updated_at`,
				tenantID, serverKey, tool.Key, tool.Name, tool.Status, tool.Description, string(tool.InputSchema), tool.Hash,
				string(findings), tool.ReadOnly, t); err != nil {
				return err
			}
		}
		pinned := cur.PinnedHash
		if d.Pin {
			pinned = d.ManifestHash
		}
		if _, err := q.Exec(ctx, `UPDATE mcp_servers SET manifest_hash = $1, pinned_hash = $2, last_discovery_at = $3, last_discovery_error = ''
			WHERE tenant_id = $4 AND server_key = $5`, d.ManifestHash, pinned, t, tenantID, serverKey); err != nil {
			return err
		}
		if e := d.Entry; e != nil {
			e.TenantID, e.ServerKey, e.DiscoveredAt = tenantID, serverKey, t
			raw := make([]string, 4)
			for i, v := range []any{orEmpty(e.Added), orEmpty(e.Removed), orEmpty(e.Changed), orEmpty(e.Findings)} {
				b, err := json.Marshal(v)
				if err != nil {
					return err
				}
				raw[i] = string(b)
			}
			if _, err := q.Exec(ctx, `INSERT INTO mcp_manifest_history (id, tenant_id, server_key, discovered_at, manifest_hash, pinned_hash,
				added, removed, changed, risk_score, findings, event_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
				e.ID, tenantID, serverKey, t, e.ManifestHash, e.PinnedHash, raw[0], raw[1], raw[2], e.RiskScore, raw[3], e.EventID); err != nil {
				return err
			}
			entry = e
		}
		if err := s.insertAudit(ctx, q, d.Audit); err != nil {
			return err
		}
		out, err = getMCPServer(ctx, q, tenantID, serverKey)
		return err
	})
	return out, entry, err
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// FailMCPDiscovery implements persistence.MCPStore.
func (s *Store) FailMCPDiscovery(ctx context.Context, tenantID, serverKey, reason string, at time.Time) error {
	return s.DB.Tx(ctx, func(q Querier) error {
		n, err := q.Exec(ctx, `UPDATE mcp_servers SET last_discovery_at = $1, last_discovery_error = $2 WHERE tenant_id = $3 AND server_key = $4`,
			at.UTC(), reason, tenantID, serverKey)
		if err == nil && n == 0 {
			err = persistence.ErrNotFound
		}
		return err
	})
}

const mcpHistoryCols = `seq, id, tenant_id, server_key, discovered_at, manifest_hash, pinned_hash, added, removed, changed, risk_score, findings, event_id`

func scanMCPEntry(r Row) (persistence.MCPManifestEntry, error) {
	var e persistence.MCPManifestEntry
	raw := make([]string, 4)
	err := r.Scan(&e.Seq, &e.ID, &e.TenantID, &e.ServerKey, Time{&e.DiscoveredAt}, &e.ManifestHash, &e.PinnedHash,
		&raw[0], &raw[1], &raw[2], &e.RiskScore, &raw[3], &e.EventID)
	if err != nil {
		return e, err
	}
	for i, dst := range []any{&e.Added, &e.Removed, &e.Changed, &e.Findings} {
		if err := json.Unmarshal([]byte(raw[i]), dst); err != nil {
			return e, fmt.Errorf("sqlstore: mcp manifest history: %w", err)
		}
	}
	return e, nil
}

// ListMCPHistory implements persistence.MCPStore.
func (s *Store) ListMCPHistory(ctx context.Context, tenantID, serverKey string, p persistence.Page) ([]persistence.MCPManifestEntry, error) {
	tail, extra := pageClause(p, 3)
	rows, err := s.DB.Replica().Query(ctx, `SELECT `+mcpHistoryCols+` FROM mcp_manifest_history WHERE tenant_id = $1 AND server_key = $2`+tail,
		append([]any{tenantID, serverKey}, extra...)...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanMCPEntry)
}
