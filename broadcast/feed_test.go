package broadcast

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"svc/messages"
	"svc/persistence/sharedstate"
)

// A published item reaches its tenant's subscriber as the frame
// {"type":...,"data":...}, byte for byte what encoding the wrapper with
// encoding/json gives, and never another tenant's subscriber.
func TestFeedFrames(t *testing.T) {
	shared := sharedstate.NewMemory()
	defer func() { _ = shared.Close() }()
	f := NewFeed(shared, hclog.NewNullLogger(), false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	sub, unsub := f.Subscribe("t1", 16)
	defer unsub()
	other, unsubOther := f.Subscribe("t2", 16)
	defer unsubOther()

	decision := "d-1"
	items := []messages.FeedItem{
		{TenantID: "t1", Type: messages.FeedEvent, Data: messages.AseEvent{EventID: "e-1", TenantID: "t1", AgentID: "a<b>&",
			Kind: "authorize_decision", OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.FixedZone("x", 3600))}},
		{TenantID: "t1", Type: messages.FeedAlert, Data: messages.AlertRecord{AlertID: "al-1", TenantID: "t1", RuleKey: "critical_deny",
			Summary: "quote \" and \u2028", DecisionID: &decision, CreatedAt: time.Unix(1700000000, 0).UTC()}},
		{TenantID: "t1", Type: messages.FeedIncident, Data: map[string]any{"incident_id": "i-1", "n": 3}},
	}
	// Items published before the subscription is live on the shared
	// channel may be missed; publish until the first one arrives.
	deadline := time.Now().Add(10 * time.Second)
	var first []byte
	for first == nil {
		f.Publish(items[0])
		select {
		case first = <-sub.C:
		case <-time.After(20 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("no frame in 10 s")
			}
		}
	}
	for len(sub.C) > 0 {
		<-sub.C // further copies of the first item
	}
	got := [][]byte{first}
	for _, it := range items[1:] {
		f.Publish(it)
		select {
		case fr := <-sub.C:
			got = append(got, fr)
		case <-time.After(10 * time.Second):
			t.Fatal("frame not delivered")
		}
	}
	for i, it := range items {
		want, err := json.Marshal(struct {
			Type string `json:"type"`
			Data any    `json:"data"`
		}{it.Type, it.Data})
		if err != nil {
			t.Fatal(err)
		}
		if string(got[i]) != string(want) {
			t.Errorf("frame %d:\n got %s\nwant %s", i, got[i], want)
		}
	}
	if len(other.C) != 0 {
		t.Fatalf("tenant t2's subscriber received %d frames of t1", len(other.C))
	}
}

// A lone node's feed encodes and publishes only the items of tenants that
// have a subscriber; once one subscribes, its items arrive.
func TestLoneFeedSkipsUnwatchedTenants(t *testing.T) {
	shared := sharedstate.NewMemory()
	defer func() { _ = shared.Close() }()
	f := NewFeed(shared, hclog.NewNullLogger(), true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	item := messages.FeedItem{TenantID: "t1", Type: messages.FeedEvent, Data: messages.AseEvent{EventID: "e-1", TenantID: "t1"}}
	for range 10 {
		f.Publish(item)
	}
	if n := f.published.Load(); n != 0 {
		t.Fatalf("%d items of an unwatched tenant published", n)
	}
	sub, unsub := f.Subscribe("t1", 16)
	defer unsub()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.Publish(item)
		select {
		case fr := <-sub.C:
			var got struct {
				Data messages.AseEvent `json:"data"`
			}
			if err := json.Unmarshal(fr, &got); err != nil || got.Data.EventID != "e-1" {
				t.Fatalf("frame %s (%v)", fr, err)
			}
			before := f.published.Load()
			if before == 0 {
				t.Fatal("the watched tenant's item was not counted as published")
			}
			f.Publish(messages.FeedItem{TenantID: "t2", Type: messages.FeedEvent, Data: messages.AseEvent{EventID: "e-2", TenantID: "t2"}})
			if after := f.published.Load(); after != before {
				t.Fatalf("an unwatched tenant's item was published beside a watched one's (%d → %d)", before, after)
			}
			return
		case <-time.After(20 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("no frame in 10 s after subscribing")
			}
		}
	}
}
