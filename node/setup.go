package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/actors"
	"svc/config"
	"svc/control"
	"svc/mcpclient"
	"svc/mcpproxy"
	"svc/mcpregistry"
	"svc/outbound"
	"svc/persistence"
	"svc/persistence/sharedstate"
	"svc/rules/manifest"
)

// bootstrap creates the SVC_BOOTSTRAP_TENANT tenant on a database that does
// not have it yet and prints its admin token, once.
func bootstrap(ctx context.Context, cfg *config.Config, store persistence.Store, log hclog.Logger, stdout io.Writer) error {
	if cfg.BootstrapTenant == "" {
		return nil
	}
	if _, err := store.GetTenantByName(ctx, cfg.BootstrapTenant); err == nil {
		return nil
	} else if !errors.Is(err, persistence.ErrNotFound) {
		return err
	}
	t, tok, err := control.NewTenant(ctx, store, cfg.BootstrapTenant, "bootstrap")
	if errors.Is(err, persistence.ErrConflict) {
		return nil // another node bootstrapped it first
	}
	if err != nil {
		return err
	}
	log.Info("bootstrapped tenant", "tenant_id", t.ID, "name", t.Name)
	base := "http://" + cfg.ListenAddr
	_, _ = fmt.Fprintf(stdout, `
================================================================================
 Bootstrapped tenant %q (id %s).
 Its admin operator token is shown ONCE; store it now:

   %s

 Operator console: %s/dashboard/ (sign in with this token)

 Try it:
   curl -H "Authorization: Bearer %s" %s/v2/agents
   curl -X POST -H "Authorization: Bearer %s" -H "Content-Type: application/json" \
        -d '{"name":"my-agent"}' %s/v2/agents
================================================================================

`, t.Name, t.ID, tok, base, tok, base, tok, base)
	return nil
}

// openSharedState connects to Valkey when SVC_VALKEY_URL is set (the state
// nodes must agree on), or keeps that state in process for a lone node.
func openSharedState(ctx context.Context, cfg *config.Config) (sharedstate.State, error) {
	if cfg.ValkeyURL == "" {
		return sharedstate.NewMemory(), nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return sharedstate.NewValkey(cctx, cfg.ValkeyURL)
}

// serveListener serves plain HTTP, or TLS when a certificate is configured.
func serveListener(srv *http.Server, ln net.Listener, cfg *config.Config) error {
	if cfg.TLSCert != "" {
		return serveTLS(srv, ln, cfg)
	}
	return srv.Serve(ln)
}

// webhookPost is the outbound chat notifier's transport; nil (a null sink)
// when SVC_WEBHOOK_URL is unset.
// mcpFetch lists an MCP server's tools over streamable HTTP through the
// outbound client, whose dialer enforces the address guard (CONTRACT §7),
// presenting the server's upstream headers (decrypted with creds) as the
// MCP proxy does.
func mcpFetch(allowPrivate bool, version string, creds *mcpproxy.Sealer) mcpregistry.Fetch {
	client := outbound.Client(allowPrivate)
	return func(ctx context.Context, srv persistence.MCPServer) ([]manifest.Tool, error) {
		c := client
		if len(srv.UpstreamAuth) > 0 {
			h, err := creds.OpenCredentials(srv.TenantID, srv.Key, srv.UpstreamAuth)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", mcpclient.ErrProtocol, err)
			}
			c = &http.Client{Transport: headerTransport{base: client.Transport, header: h}, CheckRedirect: client.CheckRedirect}
		}
		return mcpclient.Tools(ctx, c, srv.URL, version, mcpclient.DefaultLimits)
	}
}

// headerTransport sets the server record's headers on every request.
type headerTransport struct {
	base   http.RoundTripper
	header map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.header {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

func webhookPost(target string, allowPrivate bool) actors.Post {
	if target == "" {
		return nil
	}
	return outbound.Poster(target, allowPrivate)
}

// setGCPercent applies SVC_GC_PERCENT unless the operator set GOGC, and
// SVC_MEMORY_LIMIT_MIB unless the operator set GOMEMLIMIT (the Go runtime
// has applied those already). At the default 400 the collector took 4% of
// a loaded gateway's CPU instead of 17% (Postgres) or 1.5% instead of 7%
// (SQLite), for a resident size of about 155 MB instead of 92 MB under
// load. But the heap may then grow to five times its live size: with
// 100,000 agents each called once, a live heap of 430 MB made a resident
// size of 2.1 GiB. The soft memory limit (default 1 GiB) makes the
// collector run sooner near it and return freed memory to the system, so
// a small live heap keeps GOGC 400's cheap collections and a large one
// stays within the limit. Both are process-wide: the last node built in a
// process sets them.
func setGCPercent(cfg *config.Config, log hclog.Logger) {
	if os.Getenv("GOGC") != "" {
		log.Info("GOGC is set; SVC_GC_PERCENT is not applied", "GOGC", os.Getenv("GOGC"))
	} else {
		debug.SetGCPercent(cfg.GCPercent)
	}
	switch {
	case os.Getenv("GOMEMLIMIT") != "":
		log.Info("GOMEMLIMIT is set; SVC_MEMORY_LIMIT_MIB is not applied", "GOMEMLIMIT", os.Getenv("GOMEMLIMIT"))
	case cfg.MemoryLimitMiB > 0:
		debug.SetMemoryLimit(int64(cfg.MemoryLimitMiB) << 20)
	default:
		debug.SetMemoryLimit(math.MaxInt64) // none
	}
}
