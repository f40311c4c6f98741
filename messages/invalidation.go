package messages

// CacheKind names a cache whose entries every node drops when the records
// behind them change (DESIGN §1: caches are rebuildable, the database is
// the truth). A cache subscribes to its kinds on the node's invalidation
// hub (broadcast.Invalidations); adding a cache adds a kind here and edits no
// switch.
type CacheKind string

// The caches.
const (
	// CacheSkill: a tenant's skill, by skill key.
	CacheSkill CacheKind = "skill"
	// CachePolicy: a tenant's policy set.
	CachePolicy CacheKind = "policy"
	// CacheRisk: a tenant's risk weights and thresholds.
	CacheRisk CacheKind = "risk"
	// CacheBasePolicy: the base policy set, reloaded from its file.
	CacheBasePolicy CacheKind = "base"
	// CacheSOCRules: a tenant's custom detection rules.
	CacheSOCRules CacheKind = "soc_rules"
	// CacheWebhooks: a tenant's webhook export subscriptions.
	CacheWebhooks CacheKind = "webhooks"
	// CacheMCP: a tenant's MCP server, by server key, with its tools.
	CacheMCP CacheKind = "mcp"
	// CacheAll: every cache, entirely (after invalidations may have been
	// missed). Every subscriber receives it, whatever its kinds.
	CacheAll CacheKind = "*"
)

// Invalidation names what to drop: a kind, the tenant ("-" for none) and
// the entry's key ("-" for the tenant's whole entry).
type Invalidation struct {
	Kind     CacheKind
	TenantID string
	Key      string
}
