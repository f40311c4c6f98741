package mcpregistry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-hclog"

	"svc/leader"
	"svc/persistence"
	"svc/rules/manifest"
	"svc/testkit"
)

// A freed slot goes to the waiting tenants in turn, one each per round:
// tenant a's ten waiting discoveries do not hold back b's one.
func TestMCPSlotsFairAcrossTenants(t *testing.T) {
	slots := NewSlots(1)
	hold, err := slots.Acquire(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	wait := func(tenant string, n int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := slots.Acquire(context.Background(), tenant)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, fmt.Sprintf("%s%d", tenant, n))
			mu.Unlock()
			release()
		}()
		testkit.Eventually(t, 5*time.Second, "the waiter queued", func() bool { return slots.Waiting() == n })
	}
	n := 0
	for range 10 {
		n++
		wait("a", n)
	}
	n++
	wait("b", n)
	n++
	wait("c", n)
	hold()
	wg.Wait()
	// a1 waited first; then each tenant in turn: b, c, then a's others.
	if want := []string{"a1", "b11", "c12", "a2", "a3"}; !slices.Equal(order[:5], want) {
		t.Errorf("order %v, want it to begin %v", order, want)
	}
}

// A waiter that gives up is not served, and its tenant's turn goes on to
// the others; the slot it might have been handed as it gave up is passed
// on, not lost.
func TestMCPSlotsGiveUp(t *testing.T) {
	slots := NewSlots(2)
	r1, _ := slots.Acquire(context.Background(), "a")
	r2, _ := slots.Acquire(context.Background(), "a")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := slots.Acquire(ctx, "b"); !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a full budget: %v", err)
	}
	if slots.Waiting() != 0 {
		t.Errorf("%d still waiting", slots.Waiting())
	}
	r1()
	r1() // twice: once counted
	r2()
	for range 2 { // both slots are free again, and no more
		if _, err := slots.Acquire(context.Background(), "c"); err != nil {
			t.Fatal(err)
		}
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if _, err := slots.Acquire(ctx2, "c"); !errors.Is(err, ErrBusy) {
		t.Errorf("a third slot of two: %v", err)
	}
}

func servers(tenant string, n int) []persistence.MCPServer {
	out := make([]persistence.MCPServer, n)
	for i := range out {
		out[i] = persistence.MCPServer{TenantID: tenant, Key: fmt.Sprintf("%s%d", tenant, i+1)}
	}
	return out
}

// The pass's order: tenants in turn, and a tenant at its share of the
// slots passed over while another has servers left.
func TestRediscoveryQueueFair(t *testing.T) {
	// Tenant A has ten servers, B one, C two: with four slots (a share of
	// two), the first four started are A's first, B's, C's and A's second.
	q := newRediscoveryQueue(slices.Concat(servers("A", 10), servers("B", 1), servers("C", 2)), 2)
	var started []string
	for range 4 {
		started = append(started, q.take().Key)
	}
	if want := []string{"A1", "B1", "C1", "A2"}; !slices.Equal(started, want) {
		t.Errorf("first four %v, want %v", started, want)
	}
	// A at its share waits while C has one left; then, alone, it takes
	// every slot that frees.
	if s := q.take(); s.Key != "C2" {
		t.Errorf("fifth: %s, want C2", s.Key)
	}
	q.done("B")
	q.done("C")
	for _, want := range []string{"A3", "A4", "A5"} {
		if s := q.take(); s.Key != want {
			t.Errorf("got %s, want %s", s.Key, want)
		}
	}
	if q.left() != 5 {
		t.Errorf("left %d", q.left())
	}

	// Ten of A's servers that hang and ten of B's that answer: B's are
	// never held back by A's beyond A's share.
	q = newRediscoveryQueue(slices.Concat(servers("A", 10), servers("B", 10)), 2)
	running := map[string]int{}
	for range 4 {
		running[q.take().TenantID]++
	}
	for range 10 - 2 { // each of B's finishes and frees its slot for the next
		q.done("B")
		if s := q.take(); s.TenantID != "B" {
			t.Fatalf("a slot B freed went to %s while B had servers left", s.Key)
		}
	}
	if running["A"] != 2 {
		t.Errorf("A runs %d", running["A"])
	}
}

// twoTenants opens a store with two tenants.
func twoTenants(t *testing.T) (persistence.Store, string, string) {
	t.Helper()
	store, a := storeWithTenant(t)
	b := persistence.Tenant{ID: uuid.NewString(), Name: "b", CreatedAt: time.Now().UTC()}
	if err := store.CreateTenant(context.Background(), b, persistence.OperatorToken{ID: uuid.NewString(), TenantID: b.ID, Name: "admin",
		Role: persistence.RoleAdmin, CreatedAt: time.Now().UTC()}, []byte(uuid.NewString())); err != nil {
		t.Fatal(err)
	}
	return store, a.ID, b.ID
}

// A pass runs discoveries side by side within the node's slots, and a
// tenant whose six servers hang does not hold back another tenant's
// server: B's is discovered while A's still hang. An API discover call
// that finds every slot taken waits, then gives up with ErrBusy.
func TestRediscoveryRunsConcurrentlyAndFairly(t *testing.T) {
	store, a, b := twoTenants(t)
	ctx := context.Background()
	var all []persistence.MCPServer
	for i := range 6 {
		all = append(all, persistence.MCPServer{TenantID: a, Key: fmt.Sprintf("hang%d", i), URL: "hang"})
	}
	all = append(all, persistence.MCPServer{TenantID: b, Key: "fine", URL: "fine"})
	for _, s := range all {
		s.Transport, s.TrustLevel = persistence.MCPTransportHTTP, "unknown"
		if _, err := store.CreateMCPServer(ctx, s, 0); err != nil {
			t.Fatal(err)
		}
	}
	unblock := make(chan struct{})
	var mu sync.Mutex
	inFetch, most := 0, 0
	fetch := func(ctx context.Context, srv persistence.MCPServer) ([]manifest.Tool, error) {
		mu.Lock()
		inFetch++
		most = max(most, inFetch)
		mu.Unlock()
		defer func() { mu.Lock(); inFetch--; mu.Unlock() }()
		if srv.URL == "hang" {
			select {
			case <-unblock:
				return nil, errors.New("hung up")
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return []manifest.Tool{{Name: "add"}}, nil
	}
	slots := NewSlots(4)
	reg := New(store, discardEvents{}, nil, fetch, slots, hclog.NewNullLogger())
	servers, err := store.ListAllMCPServers(ctx, persistence.MCPTransportHTTP)
	if err != nil {
		t.Fatal(err)
	}
	type result struct{ ok, failed uint64 }
	done := make(chan result, 1)
	go func() {
		ok, failed, err := reg.RediscoverAll(servers, nil, hclog.NewNullLogger())
		if err != nil {
			t.Error(err)
		}
		done <- result{ok, failed}
	}()
	testkit.Eventually(t, 10*time.Second, "B's server discovered while A's hang", func() bool {
		srv, err := store.GetMCPServer(ctx, b, "fine")
		return err == nil && srv.PinnedHash != ""
	})
	testkit.Eventually(t, 10*time.Second, "four discoveries in flight at once", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inFetch == 4
	})
	// Every slot is A's now: an API call waits, then gives up.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := reg.Discover(short, b, "fine", nil, nil); !errors.Is(err, ErrBusy) {
		t.Errorf("a discover call with every slot taken: %v", err)
	}
	close(unblock)
	r := <-done
	if r.ok != 1 || r.failed != 6 || most != 4 {
		t.Errorf("ok %d, failed %d, at most %d at once", r.ok, r.failed, most)
	}
	// A pass on a node that stops leading starts nothing more.
	if _, _, err := reg.RediscoverAll(servers, func() bool { return false }, hclog.NewNullLogger()); !errors.Is(err, leader.ErrNotLeading) {
		t.Errorf("not leading: %v", err)
	}
}
