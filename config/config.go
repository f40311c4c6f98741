package config

import (
	"errors"
	"os"
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
	// CheckpointInterval is SVC_CHECKPOINT_INTERVAL_SECS: the checkpoint
	// served covers every receipt answered this long before (CONTRACT
	// §17); the leader publishes twice as often.
	CheckpointInterval time.Duration
	// LogOrigin is SVC_LOG_ORIGIN: a tenant's receipt log is named (its
	// checkpoints' origin, its note key's name) LogOrigin/<tenant id>.
	LogOrigin string

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
		{"SVC_CHECKPOINT_INTERVAL_SECS", "5", "with signed receipts, the receipt log's checkpoint served covers every receipt answered at least this long before, on any node (CONTRACT §17); the leader appends and signs twice as often, when the log grew"},
		{"SVC_LOG_ORIGIN", "svc", "prefix of each tenant's receipt log name: checkpoints' origin and note key name are <prefix>/<tenant id> (no spaces, no plus sign)"},
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
