package mcpregistry

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/leader"
	"svc/persistence"
)

// RediscoveryStats are the re-discovery job's counters.
type RediscoveryStats struct {
	Passes, Discovered, Failed atomic.Uint64
}

// rediscoveryTurn is the re-discovery's place in the node's slot turns
// (no tenant has the empty id): a pass takes its turn among the tenants
// whose discover calls wait, and shares what it gets fairly among the
// tenants of its servers (rediscoveryQueue).
const rediscoveryTurn = ""

// RediscoverAll runs one pass of the leader's re-discovery over servers
// (the job, actors.NewMCPRediscovery, lists them and runs a pass every
// interval) and counts the discoveries that succeeded and failed;
// leader.ErrNotLeading when the node stopped leading (isLeader nil: it always
// leads). A pass runs as many discoveries at once as the registry's slots
// allow, each within its deadline, and hands them out fairly across
// tenants (rediscoveryQueue): a tenant whose servers hang holds at most
// half the slots while another tenant's servers wait. A server that fails
// is recorded on it and logged on log.
func (r *Registry) RediscoverAll(servers []persistence.MCPServer, isLeader func() bool, log hclog.Logger) (ok, failed uint64, err error) {
	q := newRediscoveryQueue(servers, max(1, r.slots.size/2))
	done := make(chan discovered, len(servers))
	inFlight := 0
	settle := func(d discovered) {
		q.done(d.tenantID)
		inFlight--
		if d.err != nil {
			failed++
			log.Warn("mcp re-discovery of a server failed", "tenant_id", d.tenantID, "server_key", d.key, "error", d.err)
			return
		}
		ok++
	}
	for q.left() > 0 {
		release, aerr := r.slots.Acquire(context.Background(), rediscoveryTurn)
		if aerr != nil { // a background context never ends: unreachable
			err = aerr
			break
		}
		// What finished freed the slot: count it before choosing.
		for drained := false; !drained; {
			select {
			case d := <-done:
				settle(d)
			default:
				drained = true
			}
		}
		if isLeader != nil && !isLeader() {
			release()
			err = leader.ErrNotLeading
			break
		}
		s := q.take()
		inFlight++
		go func() {
			defer release()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, derr := r.discover(ctx, s.TenantID, s.Key, nil, func(d Discovery) persistence.AuditEvent {
				return rediscoveryAudit(s.TenantID, s.Key, d)
			}, false)
			done <- discovered{tenantID: s.TenantID, key: s.Key, err: derr}
		}()
	}
	for inFlight > 0 {
		settle(<-done)
	}
	return ok, failed, err
}

// discovered is one re-discovery's outcome.
type discovered struct {
	tenantID, key string
	err           error
}

// rediscoveryQueue hands out a pass's servers fairly across tenants: in
// turn, one server of each tenant that has servers left, skipping a
// tenant with share discoveries in flight while another tenant has
// servers left and fewer in flight (so a tenant whose servers hang cannot
// hold every slot while others wait); a tenant alone, or every tenant at
// its share, takes the next slot in turn (no slot idles). Not safe for
// concurrent use: one pass's loop owns it.
type rediscoveryQueue struct {
	tenants []string // in turn order: the order of their first server
	pending map[string][]persistence.MCPServer
	running map[string]int
	share   int
	next    int // the index in tenants whose turn is next
	n       int // servers left
}

func newRediscoveryQueue(servers []persistence.MCPServer, share int) *rediscoveryQueue {
	q := &rediscoveryQueue{pending: map[string][]persistence.MCPServer{}, running: map[string]int{}, share: max(share, 1), n: len(servers)}
	for _, s := range servers {
		if _, seen := q.pending[s.TenantID]; !seen {
			q.tenants = append(q.tenants, s.TenantID)
		}
		q.pending[s.TenantID] = append(q.pending[s.TenantID], s)
	}
	return q
}

// left is how many servers are still to start.
func (q *rediscoveryQueue) left() int { return q.n }

// take returns the next server to start (left() > 0) and counts it as in
// flight until done.
func (q *rediscoveryQueue) take() persistence.MCPServer {
	for _, withinShare := range []bool{true, false} {
		for i := range q.tenants {
			at := (q.next + i) % len(q.tenants)
			t := q.tenants[at]
			if len(q.pending[t]) == 0 || (withinShare && q.running[t] >= q.share) {
				continue
			}
			s := q.pending[t][0]
			q.pending[t] = q.pending[t][1:]
			q.running[t]++
			q.n--
			q.next = (at + 1) % len(q.tenants)
			return s
		}
	}
	panic("mcpregistry: rediscoveryQueue.take with nothing left")
}

// done records that a discovery of tenantID's finished.
func (q *rediscoveryQueue) done(tenantID string) { q.running[tenantID]-- }

// rediscoveryAudit is the audit event of a scheduled discovery.
func rediscoveryAudit(tenantID, key string, d Discovery) persistence.AuditEvent {
	return persistence.AuditEvent{ID: persistence.NewRecordID(), TenantID: tenantID, EventType: "config_change", Action: "mcp_discovered",
		Actor: "system:mcp_rediscovery", Details: DiscoveryDetails(key, d), CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
}
