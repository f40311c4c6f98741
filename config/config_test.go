package config_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"svc/config"
)

// envOf returns a getenv over m.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// merge returns a copy of base with extra on top.
func merge(base, extra map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(extra))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

func mustLoad(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	c, err := config.Load(envOf(env))
	if err != nil {
		t.Fatalf("Load(%v): unexpected error:\n%v", env, err)
	}
	if c == nil {
		t.Fatalf("Load(%v): nil Config without error", env)
	}
	return c
}

// settingErrors loads env, requires failure, and returns every problem and
// the whole error message.
func settingErrors(t *testing.T, env map[string]string) (errs []*config.SettingError, message string) {
	t.Helper()
	c, err := config.Load(envOf(env))
	if err == nil {
		t.Fatalf("Load(%v): want an error, got none", env)
	}
	if c != nil {
		t.Errorf("Load(%v): returned a Config along with an error", env)
	}
	if !errors.Is(err, config.ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) = false for %v", err)
	}
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("error is not a joined error: %T %v", err, err)
	}
	for _, e := range joined.Unwrap() {
		var se *config.SettingError
		if !errors.As(e, &se) {
			t.Fatalf("problem %v is not a *SettingError", e)
		}
		if !strings.HasPrefix(se.Error(), "config: "+se.Name+": ") {
			t.Errorf("message %q does not start with %q", se.Error(), "config: "+se.Name+": ")
		}
		errs = append(errs, se)
	}
	return errs, err.Error()
}

// names returns the variables named by errs, sorted.
func names(errs []*config.SettingError) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Name)
	}
	slices.Sort(out)
	return out
}

func defaultNodeID(t *testing.T) string {
	t.Helper()
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}

// sqliteDefaults is the Config of an empty environment, written out field by
// field from the brief and SPEC part 8.
func sqliteDefaults(t *testing.T) config.Config {
	return config.Config{
		ListenAddr:                 "127.0.0.1:8080",
		DebugAddr:                  "127.0.0.1:9090",
		DatabaseURL:                "sqlite://./svc.db",
		DBBackend:                  config.BackendSQLite,
		SQLitePath:                 "./svc.db",
		ShutdownTimeout:            20 * time.Second,
		DBPoolSize:                 5,
		DBIdleTimeout:              30 * time.Second,
		DBAcquireTimeout:           5 * time.Second,
		DBMaxLifetime:              1800 * time.Second,
		DBTestBeforeAcquire:        false,
		SkillCacheCapacity:         1024,
		MCPServerCacheCapacity:     1024,
		MCPToolCacheCapacity:       1024,
		MCPMaxServersPerTenant:     50,
		MCPDiscoveryConcurrency:    4,
		CanonicalHashCacheCapacity: 1024,
		ReplayNonceCacheCapacity:   10000,
		RiskWeightsCacheTTL:        60 * time.Second,
		RateLimitCapacity:          100,
		RateLimitRefillRate:        10,
		QuotaLimit:                 0,
		QuotaWindow:                86400 * time.Second,
		ReplayWindow:               300 * time.Second,
		ApprovalTTL:                1800 * time.Second,
		ApprovalCallbackIPLimit:    10,
		ApprovalAttemptLimit:       5,
		ApprovalMaxWaiters:         20000,
		MCPProxyTimeout:            300 * time.Second,
		MCPProxyIdle:               60 * time.Second,
		MCPProxyMaxMessage:         8 << 20,
		ApprovalAttemptWindow:      3600 * time.Second,
		AuthFailureLimit:           5,
		AuthFailureWindow:          3600 * time.Second,
		MaxBodyBytes:               1048576,
		RequestTimeout:             30 * time.Second,
		MaxConcurrentRequests:      1000,
		MaxConcurrentPerTenant:     500,
		HeaderReadTimeout:          10 * time.Second,
		BodyReadTimeout:            10 * time.Second,
		AuditBatchSize:             100,
		AuditBatchFlush:            500 * time.Millisecond,
		EarlyAnswer:                true,
		EarlyCommitWait:            20 * time.Millisecond,
		LeaderElectionInterval:     5 * time.Second,
		LeaderLease:                20 * time.Second,
		ReceiptIntegrityInterval:   3600 * time.Second,
		AuditArchivalInterval:      86400 * time.Second,
		AuditRetentionDays:         90,
		ApprovalCleanupInterval:    86400 * time.Second,
		MCPDiscoveryInterval:       time.Hour,
		ApprovalRetentionDays:      30,
		VacuumInterval:             86400 * time.Second,
		CheckpointInterval:         5 * time.Second,
		LogOrigin:                  "svc",
		PoolHealthSampleInterval:   30 * time.Second,
		HeartbeatFlushInterval:     30 * time.Second,
		WebhookFailureThreshold:    5,
		WebhookCooldown:            30 * time.Second,
		CodehostAPIURL:             "https://api.github.com",
		CodehostToolKey:            "codehost",
		AllowPrivateTargets:        false,
		EventBufferSize:            4096,
		SOCPipeline:                true,
		GCPercent:                  400,
		MemoryLimitMiB:             896,
		LogLevel:                   "info",
		LogFormat:                  "text",
		NodeID:                     defaultNodeID(t),
	}
}

func TestLoadDefaults(t *testing.T) {
	postgres := sqliteDefaults(t)
	postgres.DatabaseURL = "postgres://svc:pw@db.example:5432/svc"
	postgres.DBBackend = config.BackendPostgres
	postgres.SQLitePath = ""
	postgres.DBPoolSize = 10
	postgres.DBTestBeforeAcquire = true

	postgresql := postgres
	postgresql.DatabaseURL = "postgresql://db.example/svc"

	tests := []struct {
		name string
		env  map[string]string
		want config.Config
	}{
		{name: "empty environment is sqlite", env: nil, want: sqliteDefaults(t)},
		{
			name: "blank values count as unset",
			env:  map[string]string{"DATABASE_URL": "", "SVC_QUOTA_LIMIT": "   ", "SVC_LOG_LEVEL": "\t"},
			want: sqliteDefaults(t),
		},
		{name: "postgres defaults", env: map[string]string{"DATABASE_URL": postgres.DatabaseURL}, want: postgres},
		{name: "postgresql scheme is postgres", env: map[string]string{"DATABASE_URL": postgresql.DatabaseURL}, want: postgresql},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustLoad(t, tt.env)
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("Load:\n got %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func TestLoadNilGetenvIsEmptyEnvironment(t *testing.T) {
	got, err := config.Load(nil)
	if err != nil {
		t.Fatalf("Load(nil): %v", err)
	}
	if want := sqliteDefaults(t); !reflect.DeepEqual(*got, want) {
		t.Errorf("Load(nil):\n got %+v\nwant %+v", *got, want)
	}
}

func TestValuesAreTrimmedAndNormalised(t *testing.T) {
	c := mustLoad(t, map[string]string{
		"SVC_QUOTA_LIMIT":         "  42 ",
		"SVC_LOG_LEVEL":           " DEBUG ",
		"SVC_LOG_FORMAT":          "Json",
		"SVC_ADMIN_TOKEN":         "  tok  ",
		"DATABASE_URL":            "POSTGRES://db/svc",
		"SVC_RATE_LIMIT_CAPACITY": "2.5",
	})
	if c.QuotaLimit != 42 {
		t.Errorf("QuotaLimit = %d, want 42", c.QuotaLimit)
	}
	if c.LogLevel != "debug" || c.LogFormat != "json" {
		t.Errorf("LogLevel, LogFormat = %q, %q, want debug, json", c.LogLevel, c.LogFormat)
	}
	if c.AdminToken != "tok" {
		t.Errorf("AdminToken = %q, want %q", c.AdminToken, "tok")
	}
	if c.DBBackend != config.BackendPostgres {
		t.Errorf("DBBackend = %q, want postgres (scheme is case-insensitive)", c.DBBackend)
	}
	if c.RateLimitCapacity != 2.5 {
		t.Errorf("RateLimitCapacity = %v, want 2.5", c.RateLimitCapacity)
	}
}

func TestPoolSize(t *testing.T) {
	const pg = "postgres://db/svc"
	tests := []struct {
		name string
		env  map[string]string
		want int
	}{
		{name: "sqlite default", env: nil, want: 5},
		{name: "postgres default", env: map[string]string{"DATABASE_URL": pg}, want: 10},
		{name: "pool size set", env: map[string]string{"SVC_DB_POOL_SIZE": "3"}, want: 3},
		{name: "legacy used when pool size unset", env: map[string]string{"SVC_DB_MAX_CONNECTIONS": "7"}, want: 7},
		{name: "legacy used on postgres", env: map[string]string{"DATABASE_URL": pg, "SVC_DB_MAX_CONNECTIONS": "25"}, want: 25},
		{name: "pool size wins over legacy", env: map[string]string{"SVC_DB_POOL_SIZE": "3", "SVC_DB_MAX_CONNECTIONS": "7"}, want: 3},
		{name: "blank pool size falls to legacy", env: map[string]string{"SVC_DB_POOL_SIZE": " ", "SVC_DB_MAX_CONNECTIONS": "7"}, want: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustLoad(t, tt.env).DBPoolSize; got != tt.want {
				t.Errorf("DBPoolSize = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestTestBeforeAcquire(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want bool
	}{
		{name: "sqlite default false", env: nil, want: false},
		{name: "postgres default true", env: map[string]string{"DATABASE_URL": "postgres://db/svc"}, want: true},
		{name: "explicit true on sqlite", env: map[string]string{"SVC_DB_TEST_BEFORE_ACQUIRE": "yes"}, want: true},
		{name: "explicit false on postgres", env: map[string]string{"DATABASE_URL": "postgres://db/svc", "SVC_DB_TEST_BEFORE_ACQUIRE": "0"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustLoad(t, tt.env).DBTestBeforeAcquire; got != tt.want {
				t.Errorf("DBTestBeforeAcquire = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBooleanForms(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  bool
	}{
		{name: "true", value: "true", want: true},
		{name: "TRUE", value: "TRUE", want: true},
		{name: "1", value: "1", want: true},
		{name: "Yes", value: "Yes", want: true},
		{name: "false", value: "false", want: false},
		{name: "False", value: "False", want: false},
		{name: "0", value: "0", want: false},
		{name: "NO", value: "NO", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, map[string]string{"SVC_ALLOW_PRIVATE_TARGETS": tt.value})
			if c.AllowPrivateTargets != tt.want {
				t.Errorf("AllowPrivateTargets(%q) = %v, want %v", tt.value, c.AllowPrivateTargets, tt.want)
			}
		})
	}
}

func TestInvalidValueNamesTheVariable(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantVar string
		want    string // the whole message, or a part of it when partial
		partial bool
	}{
		{name: "float not a number", env: map[string]string{"SVC_RATE_LIMIT_CAPACITY": "abc"}, wantVar: "SVC_RATE_LIMIT_CAPACITY", want: `config: SVC_RATE_LIMIT_CAPACITY: "abc" is not a number`},
		{name: "float zero", env: map[string]string{"SVC_RATE_LIMIT_CAPACITY": "0"}, wantVar: "SVC_RATE_LIMIT_CAPACITY", want: `config: SVC_RATE_LIMIT_CAPACITY: "0" must be greater than 0`},
		{name: "float negative", env: map[string]string{"SVC_RATE_LIMIT_REFILL_RATE": "-1.5"}, wantVar: "SVC_RATE_LIMIT_REFILL_RATE", want: `"-1.5" must be greater than 0`, partial: true},
		{name: "float NaN", env: map[string]string{"SVC_RATE_LIMIT_REFILL_RATE": "NaN"}, wantVar: "SVC_RATE_LIMIT_REFILL_RATE", want: "not a finite number", partial: true},
		{name: "float infinite", env: map[string]string{"SVC_RATE_LIMIT_CAPACITY": "+Inf"}, wantVar: "SVC_RATE_LIMIT_CAPACITY", want: "not a finite number", partial: true},
		{name: "int not a number", env: map[string]string{"SVC_AUDIT_BATCH_SIZE": "lots"}, wantVar: "SVC_AUDIT_BATCH_SIZE", want: `config: SVC_AUDIT_BATCH_SIZE: "lots" is not a whole number`},
		{name: "int fraction", env: map[string]string{"SVC_MAX_CONCURRENT_REQUESTS": "1.5"}, wantVar: "SVC_MAX_CONCURRENT_REQUESTS", want: "not a whole number", partial: true},
		{name: "int zero where at least 1", env: map[string]string{"SVC_EVENT_BUFFER_SIZE": "0"}, wantVar: "SVC_EVENT_BUFFER_SIZE", want: `config: SVC_EVENT_BUFFER_SIZE: "0" must be at least 1`},
		{name: "capacity negative", env: map[string]string{"SVC_SKILL_CACHE_CAPACITY": "-1"}, wantVar: "SVC_SKILL_CACHE_CAPACITY", want: `"-1" must be at least 0`, partial: true},
		{name: "quota negative", env: map[string]string{"SVC_QUOTA_LIMIT": "-5"}, wantVar: "SVC_QUOTA_LIMIT", want: "must be at least 0", partial: true},
		{name: "tenant share over the total", env: map[string]string{"SVC_MAX_CONCURRENT_REQUESTS": "10", "SVC_MAX_CONCURRENT_PER_TENANT": "11"}, wantVar: "SVC_MAX_CONCURRENT_PER_TENANT", want: "must be at most SVC_MAX_CONCURRENT_REQUESTS", partial: true},
		{name: "body timeout zero", env: map[string]string{"SVC_BODY_READ_TIMEOUT_SECS": "0"}, wantVar: "SVC_BODY_READ_TIMEOUT_SECS", want: "must be at least 1", partial: true},
		{name: "pool size zero", env: map[string]string{"SVC_DB_POOL_SIZE": "0"}, wantVar: "SVC_DB_POOL_SIZE", want: "must be at least 1", partial: true},
		{name: "pool size text", env: map[string]string{"SVC_DB_POOL_SIZE": "ten"}, wantVar: "SVC_DB_POOL_SIZE", want: "not a whole number", partial: true},
		{name: "legacy pool negative", env: map[string]string{"SVC_DB_MAX_CONNECTIONS": "-2"}, wantVar: "SVC_DB_MAX_CONNECTIONS", want: "must be at least 1", partial: true},
		{name: "legacy pool invalid even when overridden", env: map[string]string{"SVC_DB_POOL_SIZE": "4", "SVC_DB_MAX_CONNECTIONS": "x"}, wantVar: "SVC_DB_MAX_CONNECTIONS", want: "not a whole number", partial: true},
		{name: "body limit zero", env: map[string]string{"SVC_MAX_BODY_LIMIT_BYTES": "0"}, wantVar: "SVC_MAX_BODY_LIMIT_BYTES", want: "must be at least 1", partial: true},
		{name: "body limit out of range", env: map[string]string{"SVC_MAX_BODY_LIMIT_BYTES": "99999999999999999999"}, wantVar: "SVC_MAX_BODY_LIMIT_BYTES", want: "out of range", partial: true},
		{name: "seconds negative", env: map[string]string{"SVC_SHUTDOWN_TIMEOUT_SECS": "-1"}, wantVar: "SVC_SHUTDOWN_TIMEOUT_SECS", want: "must be at least 1", partial: true},
		{name: "seconds zero", env: map[string]string{"SVC_REQUEST_TIMEOUT_SECS": "0"}, wantVar: "SVC_REQUEST_TIMEOUT_SECS", want: "must be at least 1", partial: true},
		{name: "seconds with unit suffix", env: map[string]string{"SVC_REQUEST_TIMEOUT_SECS": "30s"}, wantVar: "SVC_REQUEST_TIMEOUT_SECS", want: "not a whole number", partial: true},
		{name: "seconds overflow a duration", env: map[string]string{"SVC_APPROVAL_TTL_SECS": "9223372036854775807"}, wantVar: "SVC_APPROVAL_TTL_SECS", want: "too large", partial: true},
		{name: "milliseconds zero", env: map[string]string{"SVC_AUDIT_BATCH_FLUSH_MS": "0"}, wantVar: "SVC_AUDIT_BATCH_FLUSH_MS", want: "must be at least 1", partial: true},
		{name: "early commit wait negative", env: map[string]string{"SVC_EARLY_COMMIT_WAIT_MS": "-5"}, wantVar: "SVC_EARLY_COMMIT_WAIT_MS", want: "must be at least 0", partial: true},
		{name: "ttl negative", env: map[string]string{"SVC_RISK_WEIGHTS_CACHE_TTL_SECS": "-60"}, wantVar: "SVC_RISK_WEIGHTS_CACHE_TTL_SECS", want: "must be at least 0", partial: true},
		{name: "heartbeat zero", env: map[string]string{"SVC_HEARTBEAT_FLUSH_INTERVAL_SECS": "0"}, wantVar: "SVC_HEARTBEAT_FLUSH_INTERVAL_SECS", want: "must be at least 1", partial: true},
		{name: "bool unknown word", env: map[string]string{"SVC_CLUSTER": "maybe"}, wantVar: "SVC_CLUSTER", want: `config: SVC_CLUSTER: "maybe" is not a boolean (use true, false, 1, 0, yes or no)`},
		{name: "bool 2", env: map[string]string{"SVC_ALLOW_PRIVATE_TARGETS": "2"}, wantVar: "SVC_ALLOW_PRIVATE_TARGETS", want: "not a boolean", partial: true},
		{name: "bool on", env: map[string]string{"SVC_DB_TEST_BEFORE_ACQUIRE": "on"}, wantVar: "SVC_DB_TEST_BEFORE_ACQUIRE", want: "not a boolean", partial: true},
		{name: "log level unknown", env: map[string]string{"SVC_LOG_LEVEL": "verbose"}, wantVar: "SVC_LOG_LEVEL", want: `config: SVC_LOG_LEVEL: "verbose" is not one of trace, debug, info, warn, error`},
		{name: "log format unknown", env: map[string]string{"SVC_LOG_FORMAT": "xml"}, wantVar: "SVC_LOG_FORMAT", want: `"xml" is not one of text, json`, partial: true},
		{name: "database unknown scheme", env: map[string]string{"DATABASE_URL": "mysql://db/svc"}, wantVar: "DATABASE_URL", want: `config: DATABASE_URL: unknown scheme "mysql"; use sqlite, postgres or postgresql`},
		{name: "database without scheme", env: map[string]string{"DATABASE_URL": "./svc.db"}, wantVar: "DATABASE_URL", want: "is not a URL", partial: true},
		{name: "database sqlite without path", env: map[string]string{"DATABASE_URL": "sqlite://"}, wantVar: "DATABASE_URL", want: "needs a path", partial: true},
		{name: "database empty scheme", env: map[string]string{"DATABASE_URL": "://db/svc"}, wantVar: "DATABASE_URL", want: "is not a URL", partial: true},
		{name: "database sqlx memory form", env: map[string]string{"DATABASE_URL": "sqlite::memory:"}, wantVar: "DATABASE_URL", want: "is not a URL", partial: true},
		{name: "replica not postgres", env: map[string]string{"DATABASE_URL": "postgres://db/svc", "SVC_DB_READ_REPLICA_URL": "mysql://r/svc"}, wantVar: "SVC_DB_READ_REPLICA_URL", want: `unknown scheme "mysql"`, partial: true},
		{name: "replica checked even on sqlite", env: map[string]string{"SVC_DB_READ_REPLICA_URL": "sqlite://r.db"}, wantVar: "SVC_DB_READ_REPLICA_URL", want: `unknown scheme "sqlite"`, partial: true},
		{name: "valkey unknown scheme", env: map[string]string{"SVC_VALKEY_URL": "http://cache:6379"}, wantVar: "SVC_VALKEY_URL", want: `unknown scheme "http"; use redis, rediss, valkey, valkeys`, partial: true},
		{name: "valkey without host", env: map[string]string{"SVC_VALKEY_URL": "redis:///0"}, wantVar: "SVC_VALKEY_URL", want: "with a host", partial: true},
		{name: "webhook not http", env: map[string]string{"SVC_WEBHOOK_URL": "ftp://hooks.example/x"}, wantVar: "SVC_WEBHOOK_URL", want: `unknown scheme "ftp"`, partial: true},
		{name: "webhook no scheme", env: map[string]string{"SVC_WEBHOOK_URL": "hooks.example/x"}, wantVar: "SVC_WEBHOOK_URL", want: "is not a URL", partial: true},
		{name: "codehost api not a url", env: map[string]string{"SVC_CODEHOST_API_URL": "api.github.com"}, wantVar: "SVC_CODEHOST_API_URL", want: "is not a URL", partial: true},
		{name: "listen addr without port", env: map[string]string{"SVC_LISTEN_ADDR": "8080"}, wantVar: "SVC_LISTEN_ADDR", want: `config: SVC_LISTEN_ADDR: "8080" is not host:port`},
		{name: "listen addr named port", env: map[string]string{"SVC_LISTEN_ADDR": "0.0.0.0:http"}, wantVar: "SVC_LISTEN_ADDR", want: "no valid port number", partial: true},
		{name: "listen addr port too big", env: map[string]string{"SVC_LISTEN_ADDR": ":70000"}, wantVar: "SVC_LISTEN_ADDR", want: "no valid port number", partial: true},
		{name: "lease equal to interval", env: map[string]string{"SVC_LEADER_LEASE_SECS": "5"}, wantVar: "SVC_LEADER_LEASE_SECS", want: "config: SVC_LEADER_LEASE_SECS: 5s must be greater than SVC_LEADER_ELECTION_INTERVAL_SECS (5s)"},
		{name: "lease shorter than interval", env: map[string]string{"SVC_LEADER_ELECTION_INTERVAL_SECS": "30"}, wantVar: "SVC_LEADER_LEASE_SECS", want: "must be greater than SVC_LEADER_ELECTION_INTERVAL_SECS (30s)", partial: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs, _ := settingErrors(t, tt.env)
			if len(errs) != 1 {
				t.Fatalf("want exactly one problem, got %d: %v", len(errs), errs)
			}
			if errs[0].Name != tt.wantVar {
				t.Errorf("problem names %s, want %s", errs[0].Name, tt.wantVar)
			}
			msg := errs[0].Error()
			if tt.partial && !strings.Contains(msg, tt.want) {
				t.Errorf("message %q does not contain %q", msg, tt.want)
			}
			if !tt.partial && msg != tt.want {
				t.Errorf("message\n got %q\nwant %q", msg, tt.want)
			}
		})
	}
}

func TestSecretsAreNotEchoed(t *testing.T) {
	const secret = "hunter2"
	tests := []struct {
		name string
		env  map[string]string
	}{
		{name: "database url password", env: map[string]string{"DATABASE_URL": "mysql://svc:" + secret + "@db/svc"}},
		{name: "database url without scheme", env: map[string]string{"DATABASE_URL": "svc:" + secret + "@db/svc"}},
		{name: "replica url password", env: map[string]string{"DATABASE_URL": "postgres://db/svc", "SVC_DB_READ_REPLICA_URL": "mysql://u:" + secret + "@r/svc"}},
		{name: "valkey url password", env: map[string]string{"SVC_VALKEY_URL": "http://:" + secret + "@cache:6379"}},
		{name: "webhook url token", env: map[string]string{"SVC_WEBHOOK_URL": "ftp://hooks.example/" + secret}},
		{name: "receipt key", env: map[string]string{"SVC_RECEIPT_SIGNING_KEY": secret + "!!"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs, message := settingErrors(t, tt.env)
			if len(errs) != 1 {
				t.Fatalf("want one problem, got %v", errs)
			}
			if strings.Contains(message, secret) {
				t.Errorf("message leaks the secret: %q", message)
			}
		})
	}
}

func TestAllProblemsAreReportedTogether(t *testing.T) {
	env := map[string]string{
		"SVC_RATE_LIMIT_CAPACITY":  "abc",
		"SVC_DB_POOL_SIZE":         "0",
		"SVC_CLUSTER":              "perhaps",
		"SVC_DEBUG_ADDR":           "0.0.0.0:9090",
		"DATABASE_URL":             "mongodb://db",
		"SVC_TLS_CERT":             "/etc/svc/cert.pem",
		"SVC_RECEIPT_SIGNING_KEY":  base64.StdEncoding.EncodeToString(make([]byte, 16)),
		"SVC_AUDIT_BATCH_FLUSH_MS": "-1",
	}
	errs, message := settingErrors(t, env)
	want := []string{
		"DATABASE_URL", "SVC_AUDIT_BATCH_FLUSH_MS", "SVC_CLUSTER", "SVC_DB_POOL_SIZE", "SVC_DEBUG_ADDR",
		"SVC_RATE_LIMIT_CAPACITY", "SVC_RECEIPT_SIGNING_KEY", "SVC_TLS_KEY",
	}
	if got := names(errs); !slices.Equal(got, want) {
		t.Errorf("problems name\n got %v\nwant %v", got, want)
	}
	lines := strings.Split(message, "\n")
	if len(lines) != len(want) {
		t.Errorf("want one line per problem (%d), got %d:\n%s", len(want), len(lines), message)
	}
	for _, line := range lines {
		if !strings.HasPrefix(line, "config: ") {
			t.Errorf("line %q lacks the config: prefix", line)
		}
	}
}

func TestDebugAddrMustBeLoopback(t *testing.T) {
	tests := []struct {
		name string
		addr string
		ok   bool
	}{
		{name: "default", addr: "127.0.0.1:9090", ok: true},
		{name: "other 127/8 address", addr: "127.10.20.30:9090", ok: true},
		{name: "ipv6 loopback", addr: "[::1]:9090", ok: true},
		{name: "localhost", addr: "localhost:9090", ok: true},
		{name: "localhost any case", addr: "LocalHost:9090", ok: true},
		{name: "ipv4-mapped loopback", addr: "[::ffff:127.0.0.1]:9090", ok: true},
		{name: "all interfaces ipv4", addr: "0.0.0.0:9090", ok: false},
		{name: "all interfaces empty host", addr: ":9090", ok: false},
		{name: "all interfaces ipv6", addr: "[::]:9090", ok: false},
		{name: "private address", addr: "10.0.0.5:9090", ok: false},
		{name: "public name", addr: "debug.example.com:9090", ok: false},
		{name: "name that starts like localhost", addr: "localhost.example.com:9090", ok: false},
		{name: "no port", addr: "127.0.0.1", ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"SVC_DEBUG_ADDR": tt.addr}
			if tt.ok {
				if got := mustLoad(t, env).DebugAddr; got != tt.addr {
					t.Errorf("DebugAddr = %q, want %q", got, tt.addr)
				}
				return
			}
			errs, _ := settingErrors(t, env)
			if got := names(errs); !slices.Equal(got, []string{"SVC_DEBUG_ADDR"}) {
				t.Errorf("problems name %v, want [SVC_DEBUG_ADDR]", got)
			}
		})
	}
}

func TestListenAddrMayBeAnyHost(t *testing.T) {
	if got := mustLoad(t, map[string]string{"SVC_LISTEN_ADDR": "0.0.0.0:8443"}).ListenAddr; got != "0.0.0.0:8443" {
		t.Errorf("ListenAddr = %q, want 0.0.0.0:8443", got)
	}
}

func TestTLSCertAndKeyGoTogether(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantVar string // empty when valid
	}{
		{name: "neither", env: nil},
		{name: "both", env: map[string]string{"SVC_TLS_CERT": "/c.pem", "SVC_TLS_KEY": "/k.pem"}},
		{name: "cert only names the key", env: map[string]string{"SVC_TLS_CERT": "/c.pem"}, wantVar: "SVC_TLS_KEY"},
		{name: "key only names the cert", env: map[string]string{"SVC_TLS_KEY": "/k.pem"}, wantVar: "SVC_TLS_CERT"},
		{name: "blank key counts as missing", env: map[string]string{"SVC_TLS_CERT": "/c.pem", "SVC_TLS_KEY": "  "}, wantVar: "SVC_TLS_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantVar == "" {
				c := mustLoad(t, tt.env)
				if c.TLSCert != tt.env["SVC_TLS_CERT"] || c.TLSKey != tt.env["SVC_TLS_KEY"] {
					t.Errorf("TLSCert, TLSKey = %q, %q", c.TLSCert, c.TLSKey)
				}
				return
			}
			errs, _ := settingErrors(t, tt.env)
			if got := names(errs); !slices.Equal(got, []string{tt.wantVar}) {
				t.Errorf("problems name %v, want [%s]", got, tt.wantVar)
			}
		})
	}
}

func TestReceiptSigningKey(t *testing.T) {
	seed := bytes.Repeat([]byte{0xA5}, 32)
	good := base64.StdEncoding.EncodeToString(seed)

	c := mustLoad(t, map[string]string{"SVC_RECEIPT_SIGNING_KEY": good})
	if c.ReceiptSigningKey != good || !bytes.Equal(c.ReceiptSeed, seed) {
		t.Errorf("ReceiptSigningKey, ReceiptSeed = %q, %x; want %q, %x", c.ReceiptSigningKey, c.ReceiptSeed, good, seed)
	}
	if c := mustLoad(t, nil); c.ReceiptSigningKey != "" || c.ReceiptSeed != nil {
		t.Errorf("unset key: ReceiptSigningKey, ReceiptSeed = %q, %x; want empty", c.ReceiptSigningKey, c.ReceiptSeed)
	}

	tests := []struct {
		name  string
		value string
		want  string
	}{
		{name: "not base64", value: "not base64 at all!", want: "is not standard base64"},
		{name: "url-safe alphabet", value: base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xFB}, 32)), want: "is not standard base64"},
		{name: "unpadded", value: base64.RawStdEncoding.EncodeToString(seed), want: "is not standard base64"},
		{name: "16 bytes", value: base64.StdEncoding.EncodeToString(seed[:16]), want: "decodes to 16 bytes; want a 32-byte Ed25519 seed"},
		{name: "64 bytes (a whole private key)", value: base64.StdEncoding.EncodeToString(append(seed, seed...)), want: "decodes to 64 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs, _ := settingErrors(t, map[string]string{"SVC_RECEIPT_SIGNING_KEY": tt.value})
			if len(errs) != 1 || errs[0].Name != "SVC_RECEIPT_SIGNING_KEY" {
				t.Fatalf("want one problem naming SVC_RECEIPT_SIGNING_KEY, got %v", errs)
			}
			if !strings.Contains(errs[0].Error(), tt.want) {
				t.Errorf("message %q does not contain %q", errs[0].Error(), tt.want)
			}
		})
	}
}

func TestCluster(t *testing.T) {
	const pg, valkey = "postgres://db/svc", "redis://127.0.0.1:6379/0"
	tests := []struct {
		name    string
		env     map[string]string
		wantVar string // empty when valid
	}{
		{name: "postgres and valkey", env: map[string]string{"SVC_CLUSTER": "true", "DATABASE_URL": pg, "SVC_VALKEY_URL": valkey}},
		{name: "valkeys scheme", env: map[string]string{"SVC_CLUSTER": "1", "DATABASE_URL": pg, "SVC_VALKEY_URL": "valkeys://cache:6380"}},
		{name: "lone postgres node needs no valkey", env: map[string]string{"DATABASE_URL": pg}},
		{name: "postgres without valkey names SVC_VALKEY_URL", env: map[string]string{"SVC_CLUSTER": "true", "DATABASE_URL": pg}, wantVar: "SVC_VALKEY_URL"},
		{name: "sqlite names SVC_CLUSTER", env: map[string]string{"SVC_CLUSTER": "yes"}, wantVar: "SVC_CLUSTER"},
		{name: "sqlite with valkey still names SVC_CLUSTER", env: map[string]string{"SVC_CLUSTER": "yes", "SVC_VALKEY_URL": valkey}, wantVar: "SVC_CLUSTER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantVar == "" {
				c := mustLoad(t, tt.env)
				if want := tt.env["SVC_CLUSTER"] != ""; c.Cluster != want {
					t.Errorf("Cluster = %v, want %v", c.Cluster, want)
				}
				return
			}
			errs, _ := settingErrors(t, tt.env)
			if got := names(errs); !slices.Equal(got, []string{tt.wantVar}) {
				t.Errorf("problems name %v, want [%s]", got, tt.wantVar)
			}
		})
	}
}

func TestDatabaseURL(t *testing.T) {
	tests := []struct {
		name        string
		url         string
		wantBackend string
		wantPath    string
	}{
		{name: "relative sqlite path", url: "sqlite://./svc.db", wantBackend: config.BackendSQLite, wantPath: "./svc.db"},
		{name: "bare sqlite file name", url: "sqlite://svc.db", wantBackend: config.BackendSQLite, wantPath: "svc.db"},
		{name: "in-memory sqlite", url: "sqlite://:memory:", wantBackend: config.BackendSQLite, wantPath: ":memory:"},
		{name: "absolute sqlite path", url: "sqlite:///abs/path.db", wantBackend: config.BackendSQLite, wantPath: "/abs/path.db"},
		{name: "sqlite scheme any case", url: "SQLite:///var/lib/svc/svc.db", wantBackend: config.BackendSQLite, wantPath: "/var/lib/svc/svc.db"},
		{name: "postgres", url: "postgres://svc@db:5432/svc?sslmode=require", wantBackend: config.BackendPostgres},
		{name: "postgresql", url: "postgresql://db/svc", wantBackend: config.BackendPostgres},
		{name: "postgres with several hosts", url: "postgres://db1:5432,db2:5432/svc", wantBackend: config.BackendPostgres},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, map[string]string{"DATABASE_URL": tt.url})
			if c.DatabaseURL != tt.url || c.DBBackend != tt.wantBackend || c.SQLitePath != tt.wantPath {
				t.Errorf("DatabaseURL, DBBackend, SQLitePath = %q, %q, %q; want %q, %q, %q",
					c.DatabaseURL, c.DBBackend, c.SQLitePath, tt.url, tt.wantBackend, tt.wantPath)
			}
		})
	}
}

func TestReadReplicaIgnoredForSQLite(t *testing.T) {
	const replica = "postgresql://replica/svc"
	if got := mustLoad(t, map[string]string{"SVC_DB_READ_REPLICA_URL": replica}).ReadReplicaURL; got != "" {
		t.Errorf("sqlite: ReadReplicaURL = %q, want empty", got)
	}
	pg := mustLoad(t, map[string]string{"DATABASE_URL": "postgres://db/svc", "SVC_DB_READ_REPLICA_URL": replica})
	if pg.ReadReplicaURL != replica {
		t.Errorf("postgres: ReadReplicaURL = %q, want %q", pg.ReadReplicaURL, replica)
	}
}

func TestSuperAdminEnabled(t *testing.T) {
	tests := []struct {
		name  string
		token string
		want  bool
	}{
		{name: "unset", token: "", want: false},
		{name: "short", token: "short-token", want: false},
		{name: "31 characters", token: strings.Repeat("x", 31), want: false},
		{name: "32 characters", token: strings.Repeat("x", 32), want: true},
		{name: "long", token: strings.Repeat("x", 64), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustLoad(t, map[string]string{"SVC_ADMIN_TOKEN": tt.token})
			if got := c.SuperAdminEnabled(); got != tt.want {
				t.Errorf("SuperAdminEnabled() with %d characters = %v, want %v", len(tt.token), got, tt.want)
			}
		})
	}
}

func TestFromEnvironment(t *testing.T) {
	t.Run("reads the process environment", func(t *testing.T) {
		t.Setenv("SVC_QUOTA_LIMIT", "77")
		t.Setenv("SVC_NODE_ID", "node-from-env")
		c, err := config.FromEnvironment()
		if err != nil {
			t.Fatalf("FromEnvironment: %v", err)
		}
		if c.QuotaLimit != 77 || c.NodeID != "node-from-env" {
			t.Errorf("QuotaLimit, NodeID = %d, %q; want 77, node-from-env", c.QuotaLimit, c.NodeID)
		}
	})
	t.Run("reports invalid values", func(t *testing.T) {
		t.Setenv("SVC_QUOTA_LIMIT", "many")
		_, err := config.FromEnvironment()
		var se *config.SettingError
		if !errors.As(err, &se) || se.Name != "SVC_QUOTA_LIMIT" {
			t.Errorf("FromEnvironment error = %v, want one naming SVC_QUOTA_LIMIT", err)
		}
	})
}

// TestSettingsListsEveryVariableLoadReads records what Load asks getenv for
// and compares it with Settings().
func TestSettingsListsEveryVariableLoadReads(t *testing.T) {
	requested := map[string]int{}
	_, err := config.Load(func(name string) (string, bool) {
		requested[name]++
		return "", false
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}

	documented := map[string]bool{}
	for _, s := range config.Settings() {
		if documented[s.Name] {
			t.Errorf("Settings lists %s twice", s.Name)
		}
		documented[s.Name] = true
		if s.Default == "" || s.Meaning == "" {
			t.Errorf("Settings entry %s has an empty Default or Meaning: %+v", s.Name, s)
		}
		if s.Name != "DATABASE_URL" && !strings.HasPrefix(s.Name, "SVC_") {
			t.Errorf("Settings entry %s lacks the SVC_ prefix", s.Name)
		}
	}
	for name, n := range requested {
		if !documented[name] {
			t.Errorf("Load reads %s, which Settings does not list", name)
		}
		if n != 1 {
			t.Errorf("Load reads %s %d times, want once", name, n)
		}
	}
	for name := range documented {
		if requested[name] == 0 {
			t.Errorf("Settings lists %s, which Load does not read", name)
		}
	}
	if !slices.Equal(config.Settings(), config.Settings()) {
		t.Error("Settings order is not stable")
	}
}

// TestEverySettingTakesEffect proves each documented variable is used: a
// valid non-default value changes the loaded Config, and (observedBy,
// checkObserved) a named test sees that value change what the gateway
// does, or README says why it changes nothing.
func TestEverySettingTakesEffect(t *testing.T) {
	t.Run("observed in behaviour", checkObserved)
	pg := map[string]string{"DATABASE_URL": "postgres://db/svc"}
	tls := map[string]string{"SVC_TLS_CERT": "/c.pem", "SVC_TLS_KEY": "/k.pem"}
	samples := map[string]struct {
		base  map[string]string
		value string
	}{
		"SVC_LISTEN_ADDR":                      {value: "0.0.0.0:8081"},
		"SVC_DEBUG_ADDR":                       {value: "[::1]:9091"},
		"DATABASE_URL":                         {value: "sqlite://:memory:"},
		"SVC_DB_READ_REPLICA_URL":              {base: pg, value: "postgres://replica/svc"},
		"SVC_VALKEY_URL":                       {value: "redis://127.0.0.1:6379/0"},
		"SVC_CLUSTER":                          {base: merge(pg, map[string]string{"SVC_VALKEY_URL": "valkey://cache:6379"}), value: "true"},
		"SVC_ADMIN_TOKEN":                      {value: strings.Repeat("a", 40)},
		"SVC_BOOTSTRAP_TENANT":                 {value: "acme"},
		"SVC_SHUTDOWN_TIMEOUT_SECS":            {value: "21"},
		"SVC_DB_POOL_SIZE":                     {value: "6"},
		"SVC_DB_MAX_CONNECTIONS":               {value: "7"},
		"SVC_DB_IDLE_TIMEOUT_SECS":             {value: "31"},
		"SVC_DB_ACQUIRE_TIMEOUT_SECS":          {value: "6"},
		"SVC_DB_MAX_LIFETIME_SECS":             {value: "1801"},
		"SVC_DB_TEST_BEFORE_ACQUIRE":           {value: "true"},
		"SVC_SKILL_CACHE_CAPACITY":             {value: "0"},
		"SVC_MCP_SERVER_CACHE_CAPACITY":        {value: "1"},
		"SVC_MCP_TOOL_CACHE_CAPACITY":          {value: "2"},
		"SVC_CANONICAL_HASH_CACHE_CAPACITY":    {value: "3"},
		"SVC_REPLAY_NONCE_CACHE_CAPACITY":      {value: "4"},
		"SVC_RISK_WEIGHTS_CACHE_TTL_SECS":      {value: "0"},
		"SVC_RATE_LIMIT_CAPACITY":              {value: "1000"},
		"SVC_RATE_LIMIT_REFILL_RATE":           {value: "0.5"},
		"SVC_QUOTA_LIMIT":                      {value: "500"},
		"SVC_QUOTA_WINDOW_SECS":                {value: "3600"},
		"SVC_REPLAY_WINDOW_SECS":               {value: "60"},
		"SVC_APPROVAL_TTL_SECS":                {value: "600"},
		"SVC_APPROVAL_CALLBACK_IP_LIMIT":       {value: "11"},
		"SVC_APPROVAL_ATTEMPT_LIMIT":           {value: "6"},
		"SVC_APPROVAL_ATTEMPT_WINDOW_SECS":     {value: "3601"},
		"SVC_APPROVAL_MAX_WAITERS":             {value: "20001"},
		"SVC_MCP_PROXY_TIMEOUT_SECS":           {value: "301"},
		"SVC_MCP_PROXY_IDLE_SECS":              {value: "61"},
		"SVC_MCP_PROXY_MAX_MESSAGE_BYTES":      {value: "2048"},
		"SVC_AUTH_FAILURE_LIMIT":               {value: "7"},
		"SVC_AUTH_FAILURE_WINDOW_SECS":         {value: "3602"},
		"SVC_MAX_BODY_LIMIT_BYTES":             {value: "2048"},
		"SVC_REQUEST_TIMEOUT_SECS":             {value: "31"},
		"SVC_MAX_CONCURRENT_REQUESTS":          {value: "10"},
		"SVC_MAX_CONCURRENT_PER_TENANT":        {value: "400"},
		"SVC_HEADER_READ_TIMEOUT_SECS":         {value: "11"},
		"SVC_BODY_READ_TIMEOUT_SECS":           {value: "12"},
		"SVC_AUDIT_BATCH_SIZE":                 {value: "1"},
		"SVC_AUDIT_BATCH_FLUSH_MS":             {value: "50"},
		"SVC_EARLY_ANSWER":                     {value: "false"},
		"SVC_EARLY_COMMIT_WAIT_MS":             {value: "0"},
		"SVC_LEADER_ELECTION_INTERVAL_SECS":    {value: "6"},
		"SVC_LEADER_LEASE_SECS":                {value: "21"},
		"SVC_RECEIPT_INTEGRITY_INTERVAL_SECS":  {value: "60"},
		"SVC_AUDIT_ARCHIVAL_INTERVAL_SECS":     {value: "61"},
		"SVC_AUDIT_RETENTION_DAYS":             {value: "91"},
		"SVC_APPROVAL_CLEANUP_INTERVAL_SECS":   {value: "62"},
		"SVC_MCP_DISCOVERY_INTERVAL_SECS":      {value: "0"},
		"SVC_MCP_MAX_SERVERS_PER_TENANT":       {value: "3"},
		"SVC_MCP_DISCOVERY_CONCURRENCY":        {value: "1"},
		"SVC_APPROVAL_RETENTION_DAYS":          {value: "31"},
		"SVC_VACUUM_INTERVAL_SECS":             {value: "63"},
		"SVC_CHECKPOINT_INTERVAL_SECS":         {value: "2"},
		"SVC_LOG_ORIGIN":                       {value: "gateway.example/receipts"},
		"SVC_POOL_HEALTH_SAMPLE_INTERVAL_SECS": {value: "64"},
		"SVC_HEARTBEAT_FLUSH_INTERVAL_SECS":    {value: "65"},
		"SVC_WEBHOOK_URL":                      {value: "https://hooks.example/notify"},
		"SVC_WEBHOOK_SECRET":                   {value: "whsec"},
		"SVC_WEBHOOK_FAILURE_THRESHOLD":        {value: "9"},
		"SVC_WEBHOOK_COOLDOWN_SECS":            {value: "66"},
		"SVC_TLS_CERT":                         {base: tls, value: "/other-c.pem"},
		"SVC_TLS_KEY":                          {base: tls, value: "/other-k.pem"},
		"SVC_CHAT_SIGNING_SECRET":              {value: "chat-secret"},
		"SVC_CODEHOST_WEBHOOK_SECRET":          {value: "gh-secret"},
		"SVC_CODEHOST_APP_TOKEN":               {value: "ghs_token"},
		"SVC_CODEHOST_API_URL":                 {value: "http://127.0.0.1:9999/api"},
		"SVC_CODEHOST_TOOL_KEY":                {value: "github"},
		"SVC_ALLOW_PRIVATE_TARGETS":            {value: "true"},
		"SVC_POLICY_FILE":                      {value: "/etc/svc/policies"},
		"SVC_RECEIPT_SIGNING_KEY":              {value: base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))},
		"SVC_EVENT_BUFFER_SIZE":                {value: "16"},
		"SVC_SOC_PIPELINE":                     {value: "false"},
		"SVC_GC_PERCENT":                       {value: "100"},
		"SVC_MEMORY_LIMIT_MIB":                 {value: "2048"},
		"SVC_LOG_LEVEL":                        {value: "trace"},
		"SVC_LOG_FORMAT":                       {value: "json"},
		"SVC_NODE_ID":                          {value: "node-a"},
	}

	documented := map[string]bool{}
	for _, s := range config.Settings() {
		documented[s.Name] = true
	}
	for name := range samples {
		if !documented[name] {
			t.Errorf("sample for %s, which Settings does not list", name)
		}
	}
	for _, s := range config.Settings() {
		t.Run(s.Name, func(t *testing.T) {
			sample, ok := samples[s.Name]
			if !ok {
				t.Fatalf("no sample value for %s: add one to this test", s.Name)
			}
			before := mustLoad(t, sample.base)
			after := mustLoad(t, merge(sample.base, map[string]string{s.Name: sample.value}))
			if reflect.DeepEqual(before, after) {
				t.Errorf("setting %s=%q changed nothing", s.Name, sample.value)
			}
		})
	}
}

// TestDocumentedDefaultsAreLoadDefaults sets each variable to its documented
// Default text and expects the same Config as leaving it unset.
func TestDocumentedDefaultsAreLoadDefaults(t *testing.T) {
	described := map[string]bool{ // defaults that are descriptions, checked in TestLoadDefaults
		"SVC_DB_POOL_SIZE":              true,
		"SVC_DB_TEST_BEFORE_ACQUIRE":    true,
		"SVC_NODE_ID":                   true,
		"SVC_MAX_CONCURRENT_PER_TENANT": true,
	}
	unsetDefault := mustLoad(t, nil)
	for _, s := range config.Settings() {
		if s.Default == "unset" || described[s.Name] {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			got := mustLoad(t, map[string]string{s.Name: s.Default})
			if !reflect.DeepEqual(got, unsetDefault) {
				t.Errorf("%s=%q (its documented default) gives\n%+v\nbut unset gives\n%+v", s.Name, s.Default, *got, *unsetDefault)
			}
		})
	}
}

// docs/configuration.md's table must list every setting with its default.
func TestREADMEListsEverySetting(t *testing.T) {
	raw, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range config.Settings() {
		row := "| `" + s.Name + "` | " + strings.ReplaceAll(s.Default, "|", "\\|") + " |"
		if !strings.Contains(string(raw), row) {
			t.Errorf("docs/configuration.md lacks the row for %s with default %q", s.Name, s.Default)
		}
	}
}

// A tenant's share of the concurrent requests defaults to half of them.
func TestTenantShareDefaultsToHalf(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want int
	}{
		{nil, 500},
		{map[string]string{"SVC_MAX_CONCURRENT_REQUESTS": "10"}, 5},
		{map[string]string{"SVC_MAX_CONCURRENT_REQUESTS": "1"}, 1},
		{map[string]string{"SVC_MAX_CONCURRENT_REQUESTS": "10", "SVC_MAX_CONCURRENT_PER_TENANT": "10"}, 10},
	} {
		if got := mustLoad(t, tc.env).MaxConcurrentPerTenant; got != tc.want {
			t.Errorf("%v: MaxConcurrentPerTenant = %d, want %d", tc.env, got, tc.want)
		}
	}
}
