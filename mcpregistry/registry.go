package mcpregistry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/messages"
	"svc/persistence"
	"svc/rules/manifest"
)

// Fetch lists the tools of the http MCP server srv over the real
// protocol (mcpclient.Tools with the node's outbound client and the
// server's upstream headers; actors make no HTTP calls themselves).
type Fetch func(ctx context.Context, srv persistence.MCPServer) ([]manifest.Tool, error)

// ErrManifest wraps a manifest the gateway refuses (manifest.ErrInvalid)
// or a body that http servers must not carry. Its text keeps the prefix it
// had when the registry lived in actors/: API clients read it in
// mcp_discovery_failed answers and in a server's last_discovery_error.
var ErrManifest = errors.New("actors: mcp manifest refused")

// Registry discovers MCP servers' tools (CONTRACT §8): it lists an http
// server's tools over MCP, or takes a stdio server's manifest from the
// request, normalizes and hashes it, and records it in one transaction
// that reads the stored tools (so concurrent discoveries of one server
// apply one after the other): the first discovery pins the hash with every
// tool pending; a later one with another hash records a drift entry, puts
// added and changed tools to pending, removes the removed, and emits
// mcp_manifest_drift with the drift's risk. Every change drops the
// authorize path's cached server and tools on every node: the registry
// after its own discoveries (the leader's re-discovery, the MCP proxy's),
// the control plane after an operator's (Discover).
//
// Discoveries over MCP take a slot of the node's budget (Slots) for
// their whole run, fetch to commit: an API call waits for one at most
// SlotWait (ErrBusy past it), the leader's re-discovery as long as
// it takes.
type Registry struct {
	store  persistence.MCPStore
	events Events
	inval  Invalidator
	fetch  Fetch
	slots  *Slots
	log    hclog.Logger
}

// Events is where a drift's mcp_manifest_drift event goes (the node's
// SOC event bus, broadcast.EventBus).
type Events interface {
	Publish(ev messages.AseEvent)
}

// Invalidator drops the authorize path's cached server and tools on every
// node (the node's broadcast.Invalidations).
type Invalidator interface {
	Invalidate(ctx context.Context, inv messages.Invalidation)
}

// SlotWait bounds how long a discover call waits for a slot: one
// discovery's deadline, within which a slot frees unless many tenants
// wait (each gets its turn).
const SlotWait = 10 * time.Second

// New returns the registry; inval may be nil (tests), slots nil for a
// budget of one.
func New(store persistence.MCPStore, events Events, inval Invalidator, fetch Fetch, slots *Slots,
	log hclog.Logger) *Registry {
	if slots == nil {
		slots = NewSlots(1)
	}
	return &Registry{store: store, events: events, inval: inval, fetch: fetch, slots: slots, log: log}
}

// Discovery is the outcome of one discovery.
type Discovery struct {
	Server persistence.MCPServer
	// First: this discovery pinned the manifest.
	First bool
	// Drift: what changed against the tools known before (empty lists
	// when nothing did); Entry is the history entry, nil without drift.
	Drift manifest.Drift
	Entry *persistence.MCPManifestEntry
	// Tools is how many tools the manifest has.
	Tools int
}

// Discover runs one discovery of the tenant's server that an operator
// asked for (control.Plane.DiscoverMCPServer, which drops the server's
// caches on every node after it, as after its other changes). stdio
// servers' manifests come in tools (required); http servers are asked over
// MCP (tools must be nil). audit builds the change's audit event from its
// outcome. A failed fetch or a refused manifest is recorded on the server
// (last_discovery_error) and returned. An http server's discovery waits
// for a slot of the node's budget at most SlotWait (ErrBusy).
func (r *Registry) Discover(ctx context.Context, tenantID, key string, tools []manifest.Tool,
	audit func(Discovery) persistence.AuditEvent) (Discovery, error) {
	return r.run(ctx, tenantID, key, tools, audit, true, false)
}

// Rediscover discovers the tenant's http server again for the system, not
// for an operator (the MCP proxy, when a server says its tools changed):
// audited as actor, and, like the leader's re-discovery, it drops the
// server's caches on every node itself. It waits for a slot as Discover.
func (r *Registry) Rediscover(ctx context.Context, tenantID, key, actor string) error {
	_, err := r.discover(ctx, tenantID, key, nil, func(d Discovery) persistence.AuditEvent {
		return persistence.AuditEvent{ID: persistence.NewRecordID(), TenantID: tenantID, EventType: "config_change", Action: "mcp_discovered",
			Actor: actor, Details: DiscoveryDetails(key, d), CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	}, true)
	return err
}

// discover is a discovery that drops the server's caches after its
// commit; takeSlot false when the caller holds a slot for it already (the
// re-discovery).
func (r *Registry) discover(ctx context.Context, tenantID, key string, tools []manifest.Tool,
	audit func(Discovery) persistence.AuditEvent, takeSlot bool) (Discovery, error) {
	return r.run(ctx, tenantID, key, tools, audit, takeSlot, true)
}

// run runs one discovery; drop: drop the server's caches after the commit
// (false when the caller does).
func (r *Registry) run(ctx context.Context, tenantID, key string, tools []manifest.Tool,
	audit func(Discovery) persistence.AuditEvent, takeSlot, drop bool) (Discovery, error) {
	srv, err := r.store.GetMCPServer(ctx, tenantID, key)
	if err != nil {
		return Discovery{}, err
	}
	switch {
	case srv.Transport == persistence.MCPTransportHTTP && tools != nil:
		return Discovery{}, fmt.Errorf("%w: an http server is discovered over MCP; send no manifest", ErrManifest)
	case srv.Transport == persistence.MCPTransportHTTP:
		if takeSlot {
			wait, cancel := context.WithTimeout(ctx, SlotWait)
			release, err := r.slots.Acquire(wait, tenantID)
			cancel()
			if err != nil {
				return Discovery{}, err
			}
			defer release()
		}
		if tools, err = r.fetch(ctx, srv); err != nil {
			return Discovery{}, r.failed(tenantID, key, err)
		}
	case tools == nil:
		return Discovery{}, fmt.Errorf("%w: a stdio server's manifest is the body's tools", ErrManifest)
	}
	live, err := manifest.Normalize(tools)
	if err != nil {
		return Discovery{}, r.failed(tenantID, key, fmt.Errorf("%w: %w", ErrManifest, err))
	}
	hash := manifest.Hash(live)
	var out Discovery
	plan := func(cur persistence.MCPServer, stored []persistence.MCPTool) (persistence.MCPDiscovery, error) {
		out = Discovery{First: cur.PinnedHash == "", Tools: len(live)}
		d := persistence.MCPDiscovery{ManifestHash: hash, Pin: out.First}
		known := make([]manifest.Known, len(stored))
		byName := make(map[string]persistence.MCPTool, len(stored))
		for i, t := range stored {
			known[i] = manifest.Known{Tool: manifest.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema},
				Status: t.Status, Hash: t.Hash}
			byName[t.Name] = t
		}
		drift := manifest.Compare(known, live)
		out.Drift = drift
		// An added tool's findings are the drift's (Compare scanned it);
		// a changed one is scanned whole here (the drift has what changed).
		added, changed := map[string]bool{}, map[string]bool{}
		for _, n := range drift.Added {
			added[n] = true
		}
		for _, n := range drift.Changed {
			changed[n] = true
		}
		found := map[string][]manifest.Finding{}
		for _, f := range drift.Found {
			if added[f.Tool] {
				found[f.Tool] = append(found[f.Tool], f)
			}
		}
		for _, t := range live {
			fs := found[t.Name]
			switch {
			case changed[t.Name]:
				fs = manifest.Scan(t)
			case !added[t.Name]:
				continue
			}
			d.Upsert = append(d.Upsert, persistence.MCPTool{Key: t.Key(), Name: t.Name, Status: manifest.StatusPending,
				Description: t.Description, InputSchema: t.InputSchema, Hash: t.Hash(), Findings: storedFindings(fs), ReadOnly: t.ReadOnly})
		}
		for _, n := range drift.Removed {
			d.Delete = append(d.Delete, byName[n].Key)
		}
		if !out.First && !drift.Empty() && hash != cur.PinnedHash {
			d.Entry = &persistence.MCPManifestEntry{ID: uuid.NewString(), ManifestHash: hash, PinnedHash: cur.PinnedHash,
				Added: drift.Added, Removed: drift.Removed, Changed: drift.Changed, RiskScore: drift.Risk, Findings: storedFindings(drift.Found),
				EventID: uuid.NewString()}
		}
		if audit != nil {
			d.Audit = []persistence.AuditEvent{audit(out)}
		}
		return d, nil
	}
	srv, entry, err := r.store.ApplyMCPDiscovery(ctx, tenantID, key, plan)
	if err != nil {
		return Discovery{}, err
	}
	out.Server, out.Entry = srv, entry
	if drop {
		r.changed(ctx, tenantID, key)
	}
	if entry != nil {
		r.events.Publish(driftEvent(tenantID, key, entry))
	}
	return out, nil
}

// storedFindings are poisoning findings as the store keeps them.
func storedFindings(fs []manifest.Finding) []persistence.MCPFinding {
	out := make([]persistence.MCPFinding, len(fs))
	for i, f := range fs {
		out[i] = persistence.MCPFinding(f)
	}
	return out
}

// failed records a failed discovery on the server and returns err.
func (r *Registry) failed(tenantID, key string, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if ferr := r.store.FailMCPDiscovery(ctx, tenantID, key, storableReason(err.Error()), time.Now()); ferr != nil {
		r.log.Warn("recording a failed discovery failed", "tenant_id", tenantID, "server_key", key, "error", ferr)
	}
	return err
}

// storableReason is a failure's text as every backend stores it alike:
// UTF-8, U+0000 written as \u0000 (a reason may quote what a server sent;
// Postgres cannot store U+0000, SQLite would).
func storableReason(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", `\u0000`)
}

// Changed drops the authorize path's cached server and tools on every
// node after a change to them.
func (r *Registry) Changed(ctx context.Context, tenantID, key string) {
	r.changed(ctx, tenantID, key)
}

func (r *Registry) changed(ctx context.Context, tenantID, key string) {
	if r.inval != nil {
		r.inval.Invalidate(ctx, messages.Invalidation{Kind: messages.CacheMCP, TenantID: tenantID, Key: key})
	}
}

// driftEvent is the mcp_manifest_drift event of a drift (SPEC 6.1: agent
// unknown, decision deny; the risk is the drift's).
func driftEvent(tenantID, key string, e *persistence.MCPManifestEntry) messages.AseEvent {
	res := key
	return messages.AseEvent{EventID: e.EventID, OccurredAt: time.Now().UTC(), TenantID: tenantID, Kind: messages.KindMCPManifestDrift,
		AgentID: messages.UnknownAgent, Decision: "deny", Tool: "mcp:" + key, Action: "tools/list", Resource: &res,
		RiskScore: e.RiskScore, Reason: "manifest_drift", MatchedPolicies: []string{}, RedactedFields: []string{},
		SchemaVersion: messages.SchemaVersion}
}

// DiscoveryDetails are a discovery's audit details.
func DiscoveryDetails(key string, d Discovery) map[string]any {
	return map[string]any{"action": "mcp_discovered", "server_key": key, "first": d.First, "tools": d.Tools,
		"added": d.Drift.Added, "removed": d.Drift.Removed, "changed": d.Drift.Changed, "risk_score": d.Drift.Risk}
}
