package config

import "time"

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
	c.CheckpointInterval = v.seconds("SVC_CHECKPOINT_INTERVAL_SECS", 1)
	c.LogOrigin = v.noteName("SVC_LOG_ORIGIN")

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
