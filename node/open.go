package node

import (
	"context"
	"io"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/config"
	"svc/persistence"
	"svc/persistence/postgres"
	"svc/persistence/sqlite"
)

// NewLogger is the node's logger as SVC_LOG_LEVEL and SVC_LOG_FORMAT say,
// writing to w.
func NewLogger(cfg *config.Config, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "svc", Level: hclog.LevelFromString(cfg.LogLevel), Output: w,
		JSONFormat: cfg.LogFormat == "json", TimeFormat: time.RFC3339Nano})
}

// OpenStore opens the database as a node uses it. A lone node makes every
// agent write through this process, so the token and binding reads of
// authorize are cached with synchronous invalidation
// (persistence.CachedStore); serving says the node is about to serve.
func OpenStore(ctx context.Context, cfg *config.Config, log hclog.Logger, serving bool) (persistence.Store, error) {
	store, err := openStore(ctx, cfg)
	if err != nil || cfg.Cluster {
		return store, err
	}
	if cfg.DBBackend == config.BackendPostgres && serving {
		log.Warn("SVC_CLUSTER is false: this node caches agent tokens and seals receipts on arrival (and answers low-risk allows early unless SVC_EARLY_ANSWER=false), as a lone node; "+
			"if another node shares this database, set SVC_CLUSTER=true on every node", "cache_lifetime", persistence.CacheLifetime)
	}
	return persistence.NewCachedStore(store, 100_000), nil
}

func openStore(ctx context.Context, cfg *config.Config) (persistence.Store, error) {
	if cfg.DBBackend == config.BackendPostgres {
		return postgres.Open(ctx, postgres.Options{URL: cfg.DatabaseURL, ReplicaURL: cfg.ReadReplicaURL, PoolSize: cfg.DBPoolSize,
			IdleTimeout: cfg.DBIdleTimeout, MaxLifetime: cfg.DBMaxLifetime, AcquireTimeout: cfg.DBAcquireTimeout,
			TestBeforeAcquire: cfg.DBTestBeforeAcquire})
	}
	return sqlite.Open(ctx, sqlite.Options{Path: cfg.SQLitePath, PoolSize: cfg.DBPoolSize, IdleTimeout: cfg.DBIdleTimeout,
		MaxLifetime: cfg.DBMaxLifetime, AcquireTimeout: cfg.DBAcquireTimeout, TestBeforeAcquire: cfg.DBTestBeforeAcquire})
}
