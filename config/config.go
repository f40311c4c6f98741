package config

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrInvalid is wrapped by every error [Load] reports for a value it refuses:
// errors.Is(err, ErrInvalid) tells a configuration problem from anything else.
var ErrInvalid = errors.New("config: invalid setting")

// SettingError reports one environment variable whose value is refused. It
// wraps [ErrInvalid].
type SettingError struct {
	// Name is the environment variable, e.g. "SVC_RATE_LIMIT_CAPACITY".
	Name string
	// Problem says what is wrong. It never contains a secret.
	Problem string
}

// Error returns "config: NAME: problem".
func (e *SettingError) Error() string { return "config: " + e.Name + ": " + e.Problem }

// Unwrap returns [ErrInvalid].
func (e *SettingError) Unwrap() error { return ErrInvalid }

// The values of [Config.DBBackend].
const (
	BackendSQLite   = "sqlite"
	BackendPostgres = "postgres"
)

// minAdminTokenLen is the shortest SVC_ADMIN_TOKEN that enables super-admin.
const minAdminTokenLen = 32

// Backend-dependent defaults (documented in [Settings] as text).
const (
	defaultPoolSizeSQLite   = 5
	defaultPoolSizePostgres = 10
)

// Config is the validated configuration of one gateway process. [Load]
// builds it; every field holds either the operator's value or its default.
type Config struct {
	ListenAddr string // SVC_LISTEN_ADDR, host:port of the API listener
	DebugAddr  string // SVC_DEBUG_ADDR, loopback host:port for /debug/runtime and pprof

	DatabaseURL    string // DATABASE_URL as given
	DBBackend      string // BackendSQLite or BackendPostgres, from DATABASE_URL's scheme
	SQLitePath     string // for SQLite: the text after sqlite:// (may be ":memory:"); empty for Postgres
	ReadReplicaURL string // SVC_DB_READ_REPLICA_URL; always empty for SQLite, which ignores it
	ValkeyURL      string // SVC_VALKEY_URL; empty keeps shared state in process
	Cluster        bool   // SVC_CLUSTER; implies Postgres and Valkey

	AdminToken      string        // SVC_ADMIN_TOKEN; see SuperAdminEnabled
	BootstrapTenant string        // SVC_BOOTSTRAP_TENANT
	ShutdownTimeout time.Duration // SVC_SHUTDOWN_TIMEOUT_SECS

	DBPoolSize          int           // SVC_DB_POOL_SIZE, else legacy SVC_DB_MAX_CONNECTIONS, else 5 SQLite / 10 Postgres
	DBIdleTimeout       time.Duration // SVC_DB_IDLE_TIMEOUT_SECS
	DBAcquireTimeout    time.Duration // SVC_DB_ACQUIRE_TIMEOUT_SECS
	DBMaxLifetime       time.Duration // SVC_DB_MAX_LIFETIME_SECS
	DBTestBeforeAcquire bool          // SVC_DB_TEST_BEFORE_ACQUIRE, default true Postgres / false SQLite

	SkillCacheCapacity         int           // SVC_SKILL_CACHE_CAPACITY; 0 disables
	MCPServerCacheCapacity     int           // SVC_MCP_SERVER_CACHE_CAPACITY; 0 disables
	MCPToolCacheCapacity       int           // SVC_MCP_TOOL_CACHE_CAPACITY; 0 disables
	MCPMaxServersPerTenant     int           // SVC_MCP_MAX_SERVERS_PER_TENANT
	MCPDiscoveryConcurrency    int           // SVC_MCP_DISCOVERY_CONCURRENCY
	MCPProxyTimeout            time.Duration // SVC_MCP_PROXY_TIMEOUT_SECS
	MCPProxyIdle               time.Duration // SVC_MCP_PROXY_IDLE_SECS
	MCPProxyMaxMessage         int           // SVC_MCP_PROXY_MAX_MESSAGE_BYTES
	CanonicalHashCacheCapacity int           // SVC_CANONICAL_HASH_CACHE_CAPACITY; 0 disables
	ReplayNonceCacheCapacity   int           // SVC_REPLAY_NONCE_CACHE_CAPACITY; 0 disables
	RiskWeightsCacheTTL        time.Duration // SVC_RISK_WEIGHTS_CACHE_TTL_SECS; 0 disables

	RateLimitCapacity       float64       // SVC_RATE_LIMIT_CAPACITY, burst per agent token
	RateLimitRefillRate     float64       // SVC_RATE_LIMIT_REFILL_RATE, tokens per second
	QuotaLimit              int           // SVC_QUOTA_LIMIT; 0 disables
	QuotaWindow             time.Duration // SVC_QUOTA_WINDOW_SECS
	ReplayWindow            time.Duration // SVC_REPLAY_WINDOW_SECS
	ApprovalTTL             time.Duration // SVC_APPROVAL_TTL_SECS
	ApprovalCallbackIPLimit int           // SVC_APPROVAL_CALLBACK_IP_LIMIT
	ApprovalAttemptLimit    int           // SVC_APPROVAL_ATTEMPT_LIMIT
	ApprovalMaxWaiters      int           // SVC_APPROVAL_MAX_WAITERS
	ApprovalAttemptWindow   time.Duration // SVC_APPROVAL_ATTEMPT_WINDOW_SECS
	AuthFailureLimit        int           // SVC_AUTH_FAILURE_LIMIT
	AuthFailureWindow       time.Duration // SVC_AUTH_FAILURE_WINDOW_SECS

	MaxBodyBytes          int64         // SVC_MAX_BODY_LIMIT_BYTES
	RequestTimeout        time.Duration // SVC_REQUEST_TIMEOUT_SECS
	MaxConcurrentRequests int           // SVC_MAX_CONCURRENT_REQUESTS
	// MaxConcurrentPerTenant is SVC_MAX_CONCURRENT_PER_TENANT: one
	// tenant's share of the concurrent requests (default half of them), so
	// that no tenant can take every slot from the others.
	MaxConcurrentPerTenant int
	HeaderReadTimeout      time.Duration // SVC_HEADER_READ_TIMEOUT_SECS
	BodyReadTimeout        time.Duration // SVC_BODY_READ_TIMEOUT_SECS

	AuditBatchSize  int           // SVC_AUDIT_BATCH_SIZE
	AuditBatchFlush time.Duration // SVC_AUDIT_BATCH_FLUSH_MS (milliseconds)
	// EarlyAnswer is SVC_EARLY_ANSWER: on a lone node, low-risk read-only
	// allows are answered once their receipt is sealed, before their commit
	// (SPEC 4.2 rule 10). A clustered node never answers early.
	EarlyAnswer bool
	// EarlyCommitWait is SVC_EARLY_COMMIT_WAIT_MS (milliseconds; 0 commits
	// each early-answered allow at once).
	EarlyCommitWait time.Duration

	LeaderElectionInterval   time.Duration // SVC_LEADER_ELECTION_INTERVAL_SECS
	LeaderLease              time.Duration // SVC_LEADER_LEASE_SECS, longer than LeaderElectionInterval
	ReceiptIntegrityInterval time.Duration // SVC_RECEIPT_INTEGRITY_INTERVAL_SECS
	AuditArchivalInterval    time.Duration // SVC_AUDIT_ARCHIVAL_INTERVAL_SECS
	AuditRetentionDays       int           // SVC_AUDIT_RETENTION_DAYS
	ApprovalCleanupInterval  time.Duration // SVC_APPROVAL_CLEANUP_INTERVAL_SECS
	MCPDiscoveryInterval     time.Duration // SVC_MCP_DISCOVERY_INTERVAL_SECS; 0 disables
	ApprovalRetentionDays    int           // SVC_APPROVAL_RETENTION_DAYS
	VacuumInterval           time.Duration // SVC_VACUUM_INTERVAL_SECS
	PoolHealthSampleInterval time.Duration // SVC_POOL_HEALTH_SAMPLE_INTERVAL_SECS
	HeartbeatFlushInterval   time.Duration // SVC_HEARTBEAT_FLUSH_INTERVAL_SECS

	WebhookURL              string        // SVC_WEBHOOK_URL; empty drops notifications
	WebhookSecret           string        // SVC_WEBHOOK_SECRET; empty sends unsigned
	WebhookFailureThreshold int           // SVC_WEBHOOK_FAILURE_THRESHOLD
	WebhookCooldown         time.Duration // SVC_WEBHOOK_COOLDOWN_SECS

	TLSCert string // SVC_TLS_CERT; set together with TLSKey or not at all
	TLSKey  string // SVC_TLS_KEY

	ChatSigningSecret     string // SVC_CHAT_SIGNING_SECRET; empty disables the chat callback
	CodehostWebhookSecret string // SVC_CODEHOST_WEBHOOK_SECRET
	CodehostAppToken      string // SVC_CODEHOST_APP_TOKEN; empty disables pull-request features
	CodehostAPIURL        string // SVC_CODEHOST_API_URL
	CodehostToolKey       string // SVC_CODEHOST_TOOL_KEY

	AllowPrivateTargets bool   // SVC_ALLOW_PRIVATE_TARGETS
	PolicyFile          string // SVC_POLICY_FILE; empty uses the built-in policies

	ReceiptSigningKey string // SVC_RECEIPT_SIGNING_KEY as given (base64)
	ReceiptSeed       []byte // the decoded 32-byte Ed25519 seed; nil when ReceiptSigningKey is empty

	EventBufferSize int    // SVC_EVENT_BUFFER_SIZE
	SOCPipeline     bool   // SVC_SOC_PIPELINE; false runs no detection, correlation or live feed
	GCPercent       int    // SVC_GC_PERCENT; the Go collector's GOGC, unless GOGC itself is set
	MemoryLimitMiB  int    // SVC_MEMORY_LIMIT_MIB; the Go runtime's soft memory limit (GOMEMLIMIT) unless GOMEMLIMIT is set; 0: none
	LogLevel        string // SVC_LOG_LEVEL, lower case: trace, debug, info, warn or error
	LogFormat       string // SVC_LOG_FORMAT, lower case: text or json
	NodeID          string // SVC_NODE_ID, default hostname-pid
}

// SuperAdminEnabled reports whether AdminToken is long enough (32 characters
// or more) to enable the super-admin endpoints. A shorter or empty token is
// not an error: those endpoints then answer 401 (fail closed).
func (c *Config) SuperAdminEnabled() bool { return len(c.AdminToken) >= minAdminTokenLen }

// Setting documents one environment variable that [Load] reads.
type Setting struct {
	Name    string // the environment variable
	Default string // the default as text; "unset" when there is none
	Meaning string // one line
}

// unset is the Default text of a setting without a default value.
const unset = "unset"

// Settings returns every environment variable [Load] reads, with its default
// and meaning, in a stable order. Each call returns a fresh slice.
//
// A Default that is a plain value (not "unset" and not one of the
// backend-dependent or computed descriptions) is the exact text Load uses when
// the variable is unset.
func Settings() []Setting {
	return []Setting{
		{"SVC_LISTEN_ADDR", "127.0.0.1:8080", "API listener, host:port"},
		{"SVC_DEBUG_ADDR", "127.0.0.1:9090", "listener for /debug/runtime and pprof; must be loopback (127.0.0.0/8, ::1 or localhost)"},
		{"DATABASE_URL", "sqlite://./svc.db", "database: sqlite://PATH (sqlite://:memory: for tests), postgres://... or postgresql://..."},
		{"SVC_DB_READ_REPLICA_URL", unset, "Postgres read replica (postgres:// or postgresql://); reads go there, writes stay on the primary; ignored for SQLite"},
		{"SVC_VALKEY_URL", unset, "Valkey for state shared between nodes (redis://, rediss://, valkey:// or valkeys://); unset keeps it in process"},
		{"SVC_CLUSTER", "false", "run as one of several nodes; requires a Postgres DATABASE_URL and SVC_VALKEY_URL"},
		{"SVC_ADMIN_TOKEN", unset, "super-admin token; unset or shorter than 32 characters disables super-admin endpoints"},
		{"SVC_BOOTSTRAP_TENANT", unset, "tenant to bootstrap at startup"},
		{"SVC_SHUTDOWN_TIMEOUT_SECS", "20", "bound on finishing in-flight requests at shutdown"},
		{"SVC_DB_POOL_SIZE", "5 (SQLite), 10 (Postgres)", "max pool connections; wins over legacy SVC_DB_MAX_CONNECTIONS"},
		{"SVC_DB_MAX_CONNECTIONS", unset, "legacy name of SVC_DB_POOL_SIZE, used only when that is unset"},
		{"SVC_DB_IDLE_TIMEOUT_SECS", "30", "idle connection close"},
		{"SVC_DB_ACQUIRE_TIMEOUT_SECS", "5", "acquire failure when the pool is exhausted"},
		{"SVC_DB_MAX_LIFETIME_SECS", "1800", "connection recycle"},
		{"SVC_DB_TEST_BEFORE_ACQUIRE", "true (Postgres), false (SQLite)", "liveness check before a connection is handed out"},
		{"SVC_SKILL_CACHE_CAPACITY", "1024", "skill metadata cache entries; 0 disables"},
		{"SVC_MCP_SERVER_CACHE_CAPACITY", "1024", "MCP server records cached for authorize (tenant and server key); every change drops them on every node; 0 disables"},
		{"SVC_MCP_TOOL_CACHE_CAPACITY", "1024", "MCP tool statuses cached for authorize (tenant, server and tool key); dropped with their server's; 0 disables"},
		{"SVC_MCP_DISCOVERY_INTERVAL_SECS", "3600", "the leader re-discovers every http MCP server this often, so drift is found without anyone asking; 0 disables"},
		{"SVC_MCP_MAX_SERVERS_PER_TENANT", "50", "MCP servers one tenant may register; one more is 409 mcp_server_limit (what the leader re-discovers grows with it)"},
		{"SVC_MCP_PROXY_TIMEOUT_SECS", "300", "the MCP proxy's bound on one relayed POST (a tools/call and every message of its stream); past it the client gets JSON-RPC error -32011"},
		{"SVC_MCP_PROXY_IDLE_SECS", "60", "the MCP proxy's bound on an upstream's silence within a POST's answer (any event, progress included, resets it); past it the client gets JSON-RPC error -32011"},
		{"SVC_MCP_PROXY_MAX_MESSAGE_BYTES", "8388608", "the MCP proxy's bound on a request body and on each message an upstream sends; a larger upstream message ends its request with JSON-RPC error -32011"},
		{"SVC_MCP_DISCOVERY_CONCURRENCY", "4", "MCP discoveries over the protocol a node runs at once, the API's and the leader's re-discovery together, shared fairly across tenants; each may hold an answer of up to 8 MiB and takes 10 s at most; a discover call waits up to 10 s for one, else 503 mcp_discovery_busy"},
		{"SVC_CANONICAL_HASH_CACHE_CAPACITY", "1024", "canonical hash cache entries (SPEC 8); validated but without effect: the action hash is written directly (about 2.7 µs), which a cache keyed by the call would not beat"},
		{"SVC_REPLAY_NONCE_CACHE_CAPACITY", "10000", "replay nonce cache entries (SPEC 8); validated but without effect: nonces live in the shared state for SVC_REPLAY_WINDOW_SECS, bounded by time, never evicted by count (an evicted nonce could be replayed)"},
		{"SVC_RISK_WEIGHTS_CACHE_TTL_SECS", "60", "TTL of cached tenant risk weights; 0 disables"},
		{"SVC_RATE_LIMIT_CAPACITY", "100", "token-bucket burst per agent token"},
		{"SVC_RATE_LIMIT_REFILL_RATE", "10", "token-bucket refill, tokens per second"},
		{"SVC_QUOTA_LIMIT", "0", "requests per quota window per agent; 0 disables"},
		{"SVC_QUOTA_WINDOW_SECS", "86400", "quota window"},
		{"SVC_REPLAY_WINDOW_SECS", "300", "window in which a reused nonce is denied; a starting node restores the window's nonces from the decisions, which record them"},
		{"SVC_APPROVAL_TTL_SECS", "1800", "approval time to live"},
		{"SVC_APPROVAL_CALLBACK_IP_LIMIT", "10", "per-source-IP bucket for approve, reject, edit; refills at limit / 60 tokens per second; one bucket per valid credential at each address, one for all calls without a valid credential"},
		{"SVC_APPROVAL_ATTEMPT_LIMIT", "5", "failed (4xx) attempts per approval id per window"},
		{"SVC_APPROVAL_ATTEMPT_WINDOW_SECS", "3600", "window of SVC_APPROVAL_ATTEMPT_LIMIT"},
		{"SVC_APPROVAL_MAX_WAITERS", "20000", "requests a node holds waiting for an approval (GET /approvals/:id?wait=N), apart from SVC_MAX_CONCURRENT_REQUESTS; past it, or past an even split among the waiting tenants when the last tenth is reached, a wait answers at once with Retry-After"},
		{"SVC_AUTH_FAILURE_LIMIT", "5", "failed token attempts on authorize per source IP and tenant before 429"},
		{"SVC_AUTH_FAILURE_WINDOW_SECS", "3600", "window of SVC_AUTH_FAILURE_LIMIT"},
		{"SVC_MAX_BODY_LIMIT_BYTES", "1048576", "request body cap"},
		{"SVC_REQUEST_TIMEOUT_SECS", "30", "per-request timeout"},
		{"SVC_MAX_CONCURRENT_REQUESTS", "1000", "concurrent requests at work (a request takes a slot once its body has arrived); excess requests get 503"},
		{"SVC_MAX_CONCURRENT_PER_TENANT", "half of SVC_MAX_CONCURRENT_REQUESTS", "concurrent requests of one tenant (counted once its credential is known, bodies still arriving included; calls without a credential share one more such share); excess requests of that tenant get 429 tenant_concurrency, so no tenant can take every slot from the others; the same share bounds the tenant's open streams; at most SVC_MAX_CONCURRENT_REQUESTS"},
		{"SVC_HEADER_READ_TIMEOUT_SECS", "10", "time a client has to send a request's headers; the connection is closed after it"},
		{"SVC_BODY_READ_TIMEOUT_SECS", "10", "time a client has to send a request's body once its headers are in; a body still arriving is cut off with 408 body_timeout and the connection closed"},
		{"SVC_AUDIT_BATCH_SIZE", "100", "early flush of buffered audit events"},
		{"SVC_AUDIT_BATCH_FLUSH_MS", "500", "timer flush of buffered audit events, milliseconds"},
		{"SVC_EARLY_ANSWER", "true", "on a lone node, answer low-risk read-only allows once their receipt is sealed, before it is committed (SPEC 4.2 rule 10): a crash can lose up to SVC_EARLY_COMMIT_WAIT_MS of them, each already answered; false answers every decision after its commit. A node with SVC_CLUSTER=true never answers early"},
		{"SVC_EARLY_COMMIT_WAIT_MS", "20", "longest wait of a low-risk read allow that was answered before its commit (SPEC 4.2 rule 10) for a transaction to share, milliseconds; such writes go at once with any write whose caller waits, a read that needs them, or 64 of them; 0 commits each at once"},
		{"SVC_LEADER_ELECTION_INTERVAL_SECS", "5", "leader lease renewal"},
		{"SVC_LEADER_LEASE_SECS", "20", "leader lease length; must exceed the election interval"},
		{"SVC_RECEIPT_INTEGRITY_INTERVAL_SECS", "3600", "full receipt chain check"},
		{"SVC_AUDIT_ARCHIVAL_INTERVAL_SECS", "86400", "archival of old audit events"},
		{"SVC_AUDIT_RETENTION_DAYS", "90", "age at which audit events are archived"},
		{"SVC_APPROVAL_CLEANUP_INTERVAL_SECS", "86400", "deletion of stale decided or expired approvals"},
		{"SVC_APPROVAL_RETENTION_DAYS", "30", "age at which decided or expired approvals are deleted"},
		{"SVC_VACUUM_INTERVAL_SECS", "86400", "database space reclaim"},
		{"SVC_POOL_HEALTH_SAMPLE_INTERVAL_SECS", "30", "pool sampler; warns above 80 percent busy"},
		{"SVC_HEARTBEAT_FLUSH_INTERVAL_SECS", "30", "agent heartbeat flush"},
		{"SVC_WEBHOOK_URL", unset, "outbound chat notification URL (http or https); unset drops notifications"},
		{"SVC_WEBHOOK_SECRET", unset, "HMAC-SHA256 key signing outbound notifications; unset sends them unsigned"},
		{"SVC_WEBHOOK_FAILURE_THRESHOLD", "5", "consecutive failures that open the notification breaker"},
		{"SVC_WEBHOOK_COOLDOWN_SECS", "30", "notification breaker open time"},
		{"SVC_TLS_CERT", unset, "TLS certificate file; with SVC_TLS_KEY enables TLS on the API port"},
		{"SVC_TLS_KEY", unset, "TLS private key file; set together with SVC_TLS_CERT"},
		{"SVC_CHAT_SIGNING_SECRET", unset, "chat callback signing secret; unset makes the callback answer 404"},
		{"SVC_CODEHOST_WEBHOOK_SECRET", unset, "code-host webhook secret; unset answers 401 webhook_not_configured"},
		{"SVC_CODEHOST_APP_TOKEN", unset, "code-host bearer token; unset disables pull-request features"},
		{"SVC_CODEHOST_API_URL", "https://api.github.com", "code-host REST API base URL (http or https)"},
		{"SVC_CODEHOST_TOOL_KEY", "codehost", "tool name that pull-request protection applies to"},
		{"SVC_ALLOW_PRIVATE_TARGETS", "false", "allow outbound requests to loopback and private addresses"},
		{"SVC_POLICY_FILE", unset, "Rego file or directory replacing the built-in policies"},
		{"SVC_RECEIPT_SIGNING_KEY", unset, "standard base64 of a 32-byte Ed25519 seed signing receipts"},
		{"SVC_EVENT_BUFFER_SIZE", "4096", "bounded security event channel"},
		{"SVC_SOC_PIPELINE", "true", "false: no detection, correlation, alerts, incidents or live feed (notifications and export of decisions still run)"},
		{"SVC_GC_PERCENT", "400", "Go garbage collector target (GOGC) unless the GOGC variable is set: heap growth allowed between collections, in percent of the live heap; 400 spends less CPU collecting for more memory (see Performance)"},
		{"SVC_MEMORY_LIMIT_MIB", "896", "the Go runtime's soft memory limit in MiB (GOMEMLIMIT) unless the GOMEMLIMIT variable is set; 0 for none. Near it the collector runs sooner than SVC_GC_PERCENT allows and returns freed memory to the system, so the heap growth SVC_GC_PERCENT buys does not become resident size; set it below the memory the process may use, above its live heap (see Performance)"},
		{"SVC_LOG_LEVEL", "info", "trace, debug, info, warn or error"},
		{"SVC_LOG_FORMAT", "text", "text or json"},
		{"SVC_NODE_ID", "hostname-pid", "this node's name in leadership and metrics"},
	}
}

// FromEnvironment loads the configuration from the process environment.
func FromEnvironment() (*Config, error) { return Load(os.LookupEnv) }

// Load builds the configuration from getenv, which has the signature of
// [os.LookupEnv]; a nil getenv is an empty environment. It returns every
// problem at once, joined, each a [*SettingError] wrapping [ErrInvalid], and
// a nil Config when there is any.
func Load(getenv func(string) (string, bool)) (*Config, error) {
	env := parse(getenv)       // step 1
	cfg, errs := validate(env) // step 2
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil // step 3
}

// environment is the result of step 1: the trimmed text of every documented
// variable that is set to something other than blanks.
type environment struct {
	values   map[string]string
	settings map[string]Setting
}

// parse is step 1: it reads every variable Settings lists, once.
func parse(getenv func(string) (string, bool)) environment {
	table := Settings()
	env := environment{
		values:   make(map[string]string, len(table)),
		settings: make(map[string]Setting, len(table)),
	}
	for _, s := range table {
		env.settings[s.Name] = s
		if getenv == nil {
			continue
		}
		if v, ok := getenv(s.Name); ok {
			if v = strings.TrimSpace(v); v != "" {
				env.values[s.Name] = v
			}
		}
	}
	return env
}

// validate is step 2: types, ranges, defaults, derived fields and the rules
// that tie settings together.
func validate(env environment) (*Config, []error) {
	v := &validator{env: env, bad: make(map[string]bool)}
	c := &Config{}
	var o optionals
	v.serving(c, &o)
	v.limits(c, &o)
	v.background(c)
	o.defaults(c)
	v.crossChecks(c)
	return c, v.errs
}

// optionals are the settings whose default depends on others, read before
// those are known.
type optionals struct {
	poolSize, legacyPool, perTenant  int
	poolSet, legacySet, perTenantSet bool
	testBeforeAcquire, testSet       bool
}

// serving reads the addresses, the database and shared state, the
// administrative settings and the database pool.
func (v *validator) serving(c *Config, o *optionals) {
	c.ListenAddr = v.address("SVC_LISTEN_ADDR", false)
	c.DebugAddr = v.address("SVC_DEBUG_ADDR", true)

	v.database(c)
	c.ReadReplicaURL = v.urlSetting("SVC_DB_READ_REPLICA_URL", false, "postgres", "postgresql")
	c.ValkeyURL = v.urlSetting("SVC_VALKEY_URL", true, "redis", "rediss", "valkey", "valkeys")
	c.Cluster = v.boolean("SVC_CLUSTER")

	c.AdminToken, _ = v.text("SVC_ADMIN_TOKEN")
	c.BootstrapTenant, _ = v.text("SVC_BOOTSTRAP_TENANT")
	c.ShutdownTimeout = v.seconds("SVC_SHUTDOWN_TIMEOUT_SECS", 1)

	o.poolSize, o.poolSet = v.optionalCount("SVC_DB_POOL_SIZE", 1)
	o.legacyPool, o.legacySet = v.optionalCount("SVC_DB_MAX_CONNECTIONS", 1)
	c.DBIdleTimeout = v.seconds("SVC_DB_IDLE_TIMEOUT_SECS", 1)
	c.DBAcquireTimeout = v.seconds("SVC_DB_ACQUIRE_TIMEOUT_SECS", 1)
	c.DBMaxLifetime = v.seconds("SVC_DB_MAX_LIFETIME_SECS", 1)
	o.testBeforeAcquire, o.testSet = v.optionalBoolean("SVC_DB_TEST_BEFORE_ACQUIRE")
}

// limits reads the caches, the rate limits and quotas, the approval and
// authentication limits and the request limits.
func (v *validator) limits(c *Config, o *optionals) {
	c.SkillCacheCapacity = v.count("SVC_SKILL_CACHE_CAPACITY", 0)
	c.MCPServerCacheCapacity = v.count("SVC_MCP_SERVER_CACHE_CAPACITY", 0)
	c.MCPToolCacheCapacity = v.count("SVC_MCP_TOOL_CACHE_CAPACITY", 0)
	c.MCPMaxServersPerTenant = v.count("SVC_MCP_MAX_SERVERS_PER_TENANT", 1)
	c.MCPDiscoveryConcurrency = v.count("SVC_MCP_DISCOVERY_CONCURRENCY", 1)
	c.MCPProxyTimeout = v.seconds("SVC_MCP_PROXY_TIMEOUT_SECS", 1)
	c.MCPProxyIdle = v.seconds("SVC_MCP_PROXY_IDLE_SECS", 1)
	c.MCPProxyMaxMessage = v.count("SVC_MCP_PROXY_MAX_MESSAGE_BYTES", 1024)
	c.CanonicalHashCacheCapacity = v.count("SVC_CANONICAL_HASH_CACHE_CAPACITY", 0)
	c.ReplayNonceCacheCapacity = v.count("SVC_REPLAY_NONCE_CACHE_CAPACITY", 0)
	c.RiskWeightsCacheTTL = v.seconds("SVC_RISK_WEIGHTS_CACHE_TTL_SECS", 0)

	c.RateLimitCapacity = v.positiveFloat("SVC_RATE_LIMIT_CAPACITY")
	c.RateLimitRefillRate = v.positiveFloat("SVC_RATE_LIMIT_REFILL_RATE")
	c.QuotaLimit = v.count("SVC_QUOTA_LIMIT", 0)
	c.QuotaWindow = v.seconds("SVC_QUOTA_WINDOW_SECS", 1)
	c.ReplayWindow = v.seconds("SVC_REPLAY_WINDOW_SECS", 1)
	c.ApprovalTTL = v.seconds("SVC_APPROVAL_TTL_SECS", 1)
	c.ApprovalCallbackIPLimit = v.count("SVC_APPROVAL_CALLBACK_IP_LIMIT", 1)
	c.ApprovalAttemptLimit = v.count("SVC_APPROVAL_ATTEMPT_LIMIT", 1)
	c.ApprovalAttemptWindow = v.seconds("SVC_APPROVAL_ATTEMPT_WINDOW_SECS", 1)
	c.ApprovalMaxWaiters = v.count("SVC_APPROVAL_MAX_WAITERS", 0)
	c.AuthFailureLimit = v.count("SVC_AUTH_FAILURE_LIMIT", 1)
	c.AuthFailureWindow = v.seconds("SVC_AUTH_FAILURE_WINDOW_SECS", 1)

	c.MaxBodyBytes = v.integer("SVC_MAX_BODY_LIMIT_BYTES", 1, 64)
	c.RequestTimeout = v.seconds("SVC_REQUEST_TIMEOUT_SECS", 1)
	c.MaxConcurrentRequests = v.count("SVC_MAX_CONCURRENT_REQUESTS", 1)
	o.perTenant, o.perTenantSet = v.optionalCount("SVC_MAX_CONCURRENT_PER_TENANT", 1)
	c.HeaderReadTimeout = v.seconds("SVC_HEADER_READ_TIMEOUT_SECS", 1)
	c.BodyReadTimeout = v.seconds("SVC_BODY_READ_TIMEOUT_SECS", 1)
}

// background reads the writer, the background jobs, the outbound
// integrations, TLS, policies and receipts, the pipeline and logging.
func (v *validator) background(c *Config) {
	c.AuditBatchSize = v.count("SVC_AUDIT_BATCH_SIZE", 1)
	c.AuditBatchFlush = v.duration("SVC_AUDIT_BATCH_FLUSH_MS", time.Millisecond, 1)
	c.EarlyAnswer = v.boolean("SVC_EARLY_ANSWER")
	c.EarlyCommitWait = v.duration("SVC_EARLY_COMMIT_WAIT_MS", time.Millisecond, 0)

	c.LeaderElectionInterval = v.seconds("SVC_LEADER_ELECTION_INTERVAL_SECS", 1)
	c.LeaderLease = v.seconds("SVC_LEADER_LEASE_SECS", 1)
	c.ReceiptIntegrityInterval = v.seconds("SVC_RECEIPT_INTEGRITY_INTERVAL_SECS", 1)
	c.AuditArchivalInterval = v.seconds("SVC_AUDIT_ARCHIVAL_INTERVAL_SECS", 1)
	c.AuditRetentionDays = v.count("SVC_AUDIT_RETENTION_DAYS", 1)
	c.ApprovalCleanupInterval = v.seconds("SVC_APPROVAL_CLEANUP_INTERVAL_SECS", 1)
	c.MCPDiscoveryInterval = v.seconds("SVC_MCP_DISCOVERY_INTERVAL_SECS", 0)
	c.ApprovalRetentionDays = v.count("SVC_APPROVAL_RETENTION_DAYS", 1)
	c.VacuumInterval = v.seconds("SVC_VACUUM_INTERVAL_SECS", 1)
	c.PoolHealthSampleInterval = v.seconds("SVC_POOL_HEALTH_SAMPLE_INTERVAL_SECS", 1)
	c.HeartbeatFlushInterval = v.seconds("SVC_HEARTBEAT_FLUSH_INTERVAL_SECS", 1)

	c.WebhookURL = v.urlSetting("SVC_WEBHOOK_URL", true, "http", "https")
	c.WebhookSecret, _ = v.text("SVC_WEBHOOK_SECRET")
	c.WebhookFailureThreshold = v.count("SVC_WEBHOOK_FAILURE_THRESHOLD", 1)
	c.WebhookCooldown = v.seconds("SVC_WEBHOOK_COOLDOWN_SECS", 1)

	c.TLSCert, _ = v.text("SVC_TLS_CERT")
	c.TLSKey, _ = v.text("SVC_TLS_KEY")

	c.ChatSigningSecret, _ = v.text("SVC_CHAT_SIGNING_SECRET")
	c.CodehostWebhookSecret, _ = v.text("SVC_CODEHOST_WEBHOOK_SECRET")
	c.CodehostAppToken, _ = v.text("SVC_CODEHOST_APP_TOKEN")
	c.CodehostAPIURL = v.urlSetting("SVC_CODEHOST_API_URL", true, "http", "https")
	c.CodehostToolKey, _ = v.text("SVC_CODEHOST_TOOL_KEY")

	c.AllowPrivateTargets = v.boolean("SVC_ALLOW_PRIVATE_TARGETS")
	c.PolicyFile, _ = v.text("SVC_POLICY_FILE")
	c.ReceiptSigningKey, c.ReceiptSeed = v.receiptKey("SVC_RECEIPT_SIGNING_KEY")

	c.EventBufferSize = v.count("SVC_EVENT_BUFFER_SIZE", 1)
	c.SOCPipeline = v.boolean("SVC_SOC_PIPELINE")
	c.GCPercent = v.count("SVC_GC_PERCENT", 10)
	c.MemoryLimitMiB = v.count("SVC_MEMORY_LIMIT_MIB", 0)
	c.LogLevel = v.choice("SVC_LOG_LEVEL", "trace", "debug", "info", "warn", "error")
	c.LogFormat = v.choice("SVC_LOG_FORMAT", "text", "json")
	c.NodeID = v.nodeID("SVC_NODE_ID")
}

// defaults applies the defaults that depend on the backend, now that
// DATABASE_URL is known.
func (o *optionals) defaults(c *Config) {
	switch {
	case o.poolSet:
		c.DBPoolSize = o.poolSize
	case o.legacySet:
		c.DBPoolSize = o.legacyPool
	case c.DBBackend == BackendPostgres:
		c.DBPoolSize = defaultPoolSizePostgres
	default:
		c.DBPoolSize = defaultPoolSizeSQLite
	}
	if o.perTenantSet {
		c.MaxConcurrentPerTenant = o.perTenant
	} else {
		c.MaxConcurrentPerTenant = max(1, c.MaxConcurrentRequests/2)
	}
	if o.testSet {
		c.DBTestBeforeAcquire = o.testBeforeAcquire
	} else {
		c.DBTestBeforeAcquire = c.DBBackend == BackendPostgres
	}
	if c.DBBackend == BackendSQLite {
		c.ReadReplicaURL = "" // SPEC part 8: ignored for SQLite
	}
}

// crossChecks applies the rules that tie settings together. A rule is skipped
// when one of its inputs already failed, so one mistake gives one message.
func (v *validator) crossChecks(c *Config) {
	switch {
	case c.TLSCert != "" && c.TLSKey == "":
		v.fail("SVC_TLS_KEY", "must be set when SVC_TLS_CERT is set")
	case c.TLSKey != "" && c.TLSCert == "":
		v.fail("SVC_TLS_CERT", "must be set when SVC_TLS_KEY is set")
	}

	if c.Cluster && !v.bad["DATABASE_URL"] {
		switch {
		case c.DBBackend == BackendSQLite:
			v.fail("SVC_CLUSTER", "true needs a postgres DATABASE_URL; SQLite cannot be shared between nodes")
		case c.ValkeyURL == "" && !v.bad["SVC_VALKEY_URL"]:
			v.fail("SVC_VALKEY_URL", "must be set when SVC_CLUSTER is true")
		}
	}

	if !v.bad["SVC_MAX_CONCURRENT_PER_TENANT"] && !v.bad["SVC_MAX_CONCURRENT_REQUESTS"] &&
		c.MaxConcurrentPerTenant > c.MaxConcurrentRequests {
		v.fail("SVC_MAX_CONCURRENT_PER_TENANT", "%d must be at most SVC_MAX_CONCURRENT_REQUESTS (%d)",
			c.MaxConcurrentPerTenant, c.MaxConcurrentRequests)
	}

	if !v.bad["SVC_LEADER_LEASE_SECS"] && !v.bad["SVC_LEADER_ELECTION_INTERVAL_SECS"] &&
		c.LeaderLease <= c.LeaderElectionInterval {
		v.fail("SVC_LEADER_LEASE_SECS", "%s must be greater than SVC_LEADER_ELECTION_INTERVAL_SECS (%s)",
			c.LeaderLease, c.LeaderElectionInterval)
	}
}

// validator collects the problems of step 2.
type validator struct {
	env  environment
	errs []error
	bad  map[string]bool // variables that already have a problem
}

func (v *validator) fail(name, format string, args ...any) {
	v.errs = append(v.errs, &SettingError{Name: name, Problem: fmt.Sprintf(format, args...)})
	v.bad[name] = true
}

// lookup returns the operator's text for name, if set.
func (v *validator) lookup(name string) (string, bool) {
	if _, ok := v.env.settings[name]; !ok {
		panic("config: internal error: " + name + " is read but not listed in Settings()")
	}
	s, ok := v.env.values[name]
	return s, ok
}

// text returns the operator's text for name or, when unset, its documented
// default ("" when that is unset). fromEnv tells which.
func (v *validator) text(name string) (s string, fromEnv bool) {
	if s, ok := v.lookup(name); ok {
		return s, true
	}
	if d := v.env.settings[name].Default; d != unset {
		return d, false
	}
	return "", false
}

// refuse records problem for the operator's value of name. A documented
// default that does not pass its own check is a bug in this package.
func (v *validator) refuse(name string, fromEnv bool, problem string) {
	if !fromEnv {
		panic(fmt.Sprintf("config: internal error: documented default of %s: %s", name, problem))
	}
	v.fail(name, "%s", problem)
}

// integer returns name as a whole number (at least least) that fits in bits.
func (v *validator) integer(name string, least int64, bits int) int64 {
	s, fromEnv := v.text(name)
	n, problem := parseInteger(s, least, bits)
	if problem != "" {
		v.refuse(name, fromEnv, problem)
		return 0
	}
	return n
}

// count is integer sized for an int.
func (v *validator) count(name string, least int64) int {
	return int(v.integer(name, least, strconv.IntSize))
}

// optionalCount is count for a setting whose default Load computes; set is
// false when the variable is unset or invalid.
func (v *validator) optionalCount(name string, least int64) (n int, set bool) {
	s, ok := v.lookup(name)
	if !ok {
		return 0, false
	}
	i, problem := parseInteger(s, least, strconv.IntSize)
	if problem != "" {
		v.fail(name, "%s", problem)
		return 0, false
	}
	return int(i), true
}

// duration returns name as a whole number of units (at least least).
func (v *validator) duration(name string, unit time.Duration, least int64) time.Duration {
	n := v.integer(name, least, 64)
	if n > math.MaxInt64/int64(unit) {
		s, _ := v.text(name)
		v.fail(name, "%q is too large", s)
		return 0
	}
	return time.Duration(n) * unit
}

// seconds is duration in whole seconds.
func (v *validator) seconds(name string, least int64) time.Duration {
	return v.duration(name, time.Second, least)
}

// positiveFloat returns name as a finite number greater than zero.
func (v *validator) positiveFloat(name string) float64 {
	s, fromEnv := v.text(name)
	f, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil:
		v.refuse(name, fromEnv, fmt.Sprintf("%q is not a number", s))
	case math.IsNaN(f) || math.IsInf(f, 0):
		v.refuse(name, fromEnv, fmt.Sprintf("%q is not a finite number", s))
	case f <= 0:
		v.refuse(name, fromEnv, fmt.Sprintf("%q must be greater than 0", s))
	default:
		return f
	}
	return 0
}

func (v *validator) boolean(name string) bool {
	s, fromEnv := v.text(name)
	b, ok := parseBool(s)
	if !ok {
		v.refuse(name, fromEnv, boolProblem(s))
	}
	return b
}

// optionalBoolean is boolean for a setting whose default Load computes.
func (v *validator) optionalBoolean(name string) (b, set bool) {
	s, ok := v.lookup(name)
	if !ok {
		return false, false
	}
	b, ok = parseBool(s)
	if !ok {
		v.fail(name, "%s", boolProblem(s))
		return false, false
	}
	return b, true
}

// choice returns name in lower case, which must be one of options.
func (v *validator) choice(name string, options ...string) string {
	s, fromEnv := v.text(name)
	lower := strings.ToLower(s)
	for _, o := range options {
		if lower == o {
			return lower
		}
	}
	v.refuse(name, fromEnv, fmt.Sprintf("%q is not one of %s", s, strings.Join(options, ", ")))
	return ""
}

// address returns name as host:port with a numeric port; when loopbackOnly,
// the host must be a loopback address or "localhost".
func (v *validator) address(name string, loopbackOnly bool) string {
	s, fromEnv := v.text(name)
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		v.refuse(name, fromEnv, fmt.Sprintf("%q is not host:port", s))
		return s
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		v.refuse(name, fromEnv, fmt.Sprintf("%q has no valid port number (0 to 65535)", s))
		return s
	}
	if loopbackOnly && !isLoopback(host) {
		v.refuse(name, fromEnv, fmt.Sprintf("%q is not a loopback address (127.0.0.0/8, ::1 or localhost)", s))
	}
	return s
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// database reads DATABASE_URL and derives DBBackend and SQLitePath. The
// value is not echoed: it may carry a password.
func (v *validator) database(c *Config) {
	const name = "DATABASE_URL"
	s, fromEnv := v.text(name)
	c.DatabaseURL = s
	scheme, rest, ok := splitScheme(s)
	if !ok {
		v.refuse(name, fromEnv, "is not a URL; use sqlite://PATH, postgres://... or postgresql://...")
		return
	}
	switch strings.ToLower(scheme) {
	case "sqlite":
		if rest == "" {
			v.refuse(name, fromEnv, "sqlite:// needs a path, e.g. sqlite://./svc.db or sqlite://:memory:")
			return
		}
		c.DBBackend, c.SQLitePath = BackendSQLite, rest
	case "postgres", "postgresql":
		// The rest is pgx's to parse (it accepts forms net/url refuses, such as
		// several hosts); a bad one fails when the pool is constructed.
		c.DBBackend = BackendPostgres
	default:
		v.refuse(name, fromEnv, fmt.Sprintf("unknown scheme %q; use sqlite, postgres or postgresql", scheme))
	}
}

// urlSetting returns name, when set, as a URL with one of schemes (and a
// host when needHost). The value is not echoed: it may carry credentials.
func (v *validator) urlSetting(name string, needHost bool, schemes ...string) string {
	s, fromEnv := v.text(name)
	if s == "" {
		return ""
	}
	want := strings.Join(schemes, ", ")
	scheme, _, ok := splitScheme(s)
	if !ok {
		v.refuse(name, fromEnv, "is not a URL with a scheme ("+want+")")
		return s
	}
	known := false
	for _, k := range schemes {
		known = known || strings.EqualFold(scheme, k)
	}
	if !known {
		v.refuse(name, fromEnv, fmt.Sprintf("unknown scheme %q; use %s", scheme, want))
		return s
	}
	if needHost {
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			v.refuse(name, fromEnv, "is not a valid URL with a host")
		}
	}
	return s
}

// splitScheme splits "scheme://rest"; ok is false when s does not start with
// a syntactically valid scheme followed by "://".
func splitScheme(s string) (scheme, rest string, ok bool) {
	scheme, rest, found := strings.Cut(s, "://")
	if !found || scheme == "" {
		return "", "", false
	}
	for i, r := range scheme {
		letter := 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
		other := '0' <= r && r <= '9' || r == '+' || r == '-' || r == '.'
		if !letter && (i == 0 || !other) {
			return "", "", false
		}
	}
	return scheme, rest, true
}

// receiptKey returns name and its decoded Ed25519 seed, when set. The value
// is not echoed: it is a private key.
func (v *validator) receiptKey(name string) (string, []byte) {
	s, ok := v.lookup(name)
	if !ok {
		return "", nil
	}
	seed, err := base64.StdEncoding.Strict().DecodeString(s)
	switch {
	case err != nil:
		v.fail(name, "is not standard base64 (value not shown)")
		return s, nil
	case len(seed) != ed25519.SeedSize:
		v.fail(name, "decodes to %d bytes; want a %d-byte Ed25519 seed", len(seed), ed25519.SeedSize)
		return s, nil
	}
	return s, seed
}

// nodeID returns name or, when unset, hostname-pid.
func (v *validator) nodeID(name string) string {
	if s, ok := v.lookup(name); ok {
		return s
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}

// parseInteger parses a base-10 whole number, at least least, that fits in
// bits; problem is empty on success.
func parseInteger(s string, least int64, bits int) (n int64, problem string) {
	n, err := strconv.ParseInt(s, 10, bits)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Sprintf("%q is out of range", s)
	case err != nil:
		return 0, fmt.Sprintf("%q is not a whole number", s)
	case n < least:
		return 0, fmt.Sprintf("%q must be at least %d", s, least)
	}
	return n, ""
}

// parseBool accepts true, false, 1, 0, yes and no in any case.
func parseBool(s string) (b, ok bool) {
	switch strings.ToLower(s) {
	case "true", "1", "yes":
		return true, true
	case "false", "0", "no":
		return false, true
	}
	return false, false
}

func boolProblem(s string) string {
	return fmt.Sprintf("%q is not a boolean (use true, false, 1, 0, yes or no)", s)
}
