package broadcast

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/messages"
	"svc/persistence/sharedstate"
	"svc/testkit"
)

// recorder collects the invalidations a subscriber receives.
type recorder struct {
	mu  sync.Mutex
	got []messages.Invalidation
}

func (r *recorder) drop(inv messages.Invalidation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, inv)
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = nil
}

// first is the first invalidation received.
func (r *recorder) first() messages.Invalidation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[0]
}

func (r *recorder) kinds() []messages.CacheKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []messages.CacheKind
	for _, inv := range r.got {
		out = append(out, inv.Kind)
	}
	return out
}

// Two nodes' hubs on one shared state: a change applies on its node at
// once and on the other through the channel; a broadcast only on the
// other; subscribers get their kinds only, and every-cache drops.
func TestInvalidationsAcrossNodes(t *testing.T) {
	st := sharedstate.NewMemory()
	t.Cleanup(func() { _ = st.Close() })
	a, b := NewInvalidations(st, hclog.NewNullLogger()), NewInvalidations(st, hclog.NewNullLogger())
	var aSkills, bSkills, bHooks recorder
	a.Subscribe(aSkills.drop, messages.CacheSkill)
	b.Subscribe(bSkills.drop, messages.CacheSkill, messages.CachePolicy)
	b.Subscribe(bHooks.drop, messages.CacheWebhooks)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go b.Run(ctx)
	// Once its subscription is made, b drops every cache: changes made
	// before it was may have been missed.
	testkit.Eventually(t, 2*time.Second, "the every-cache drop of b's new subscription", func() bool {
		return slices.Equal(bSkills.kinds(), []messages.CacheKind{messages.CacheAll}) &&
			slices.Equal(bHooks.kinds(), []messages.CacheKind{messages.CacheAll})
	})
	bSkills.reset()
	bHooks.reset()

	a.Invalidate(ctx, messages.Invalidation{Kind: messages.CacheSkill, TenantID: "t1", Key: "github"})
	if got := aSkills.kinds(); !slices.Equal(got, []messages.CacheKind{messages.CacheSkill}) {
		t.Fatalf("a's own change applied on a as %v", got)
	}
	testkit.Eventually(t, 2*time.Second, "the change on b", func() bool { return len(bSkills.kinds()) == 1 })
	if inv := bSkills.first(); inv.TenantID != "t1" || inv.Key != "github" {
		t.Fatalf("b got %+v", inv)
	}
	a.Broadcast(ctx, messages.Invalidation{Kind: messages.CacheWebhooks, TenantID: "t1"})
	testkit.Eventually(t, 2*time.Second, "the broadcast on b", func() bool { return len(bHooks.kinds()) == 1 })
	if got := aSkills.kinds(); len(got) != 1 {
		t.Fatalf("a broadcast applied on a: %v", got)
	}
	if inv := bHooks.first(); inv.Key != "-" {
		t.Fatalf("an empty key travels as %q, want -", inv.Key)
	}
	if got := bSkills.kinds(); len(got) != 1 {
		t.Fatalf("the skill subscriber got the webhooks drop: %v", got)
	}
	// Every cache: each subscriber once.
	b.apply(messages.Invalidation{Kind: messages.CacheAll})
	if len(bSkills.kinds()) != 2 || len(bHooks.kinds()) != 2 {
		t.Fatalf("every-cache drop: %v and %v", bSkills.kinds(), bHooks.kinds())
	}
}
