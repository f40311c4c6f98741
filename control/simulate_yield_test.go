package control

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestRestAfter: a simulation rests only after a page during which its
// node decided at least yieldBusyRate live calls a second, and then long
// enough that the page took yieldShare of the time.
func TestRestAfter(t *testing.T) {
	page := 100 * time.Millisecond
	for _, c := range []struct {
		live uint64
		want time.Duration
	}{
		{0, 0},
		{19, 0},                       // 190 a second: not busy
		{20, 1900 * time.Millisecond}, // 200 a second: busy
		{5000, 1900 * time.Millisecond},
	} {
		if got := restAfter(page, c.live); got != c.want {
			t.Errorf("a %v page with %d live calls: rest %v, want %v", page, c.live, got, c.want)
		}
	}
	if rest := restAfter(page, 5000); float64(page)/float64(page+rest) != yieldShare {
		t.Errorf("share %v, want %v", float64(page)/float64(page+rest), yieldShare)
	}
	if got := restAfter(0, 5000); got != 0 {
		t.Errorf("an instant page rests %v", got)
	}
}

// busyNode decides 1,000 live calls between two reads of its counter.
type busyNode struct{ n atomic.Uint64 }

func (b *busyNode) Stats() (uint64, uint64, uint64) { return b.n.Add(1000), 0, 0 }

// TestYield: a simulation on a node without live calls does not rest; on
// a busy node it rests, and a cancelled simulation stops resting at once.
func TestYield(t *testing.T) {
	idle := &yielder{}
	idle.start()
	if err := idle.yield(context.Background()); err != nil {
		t.Fatal(err)
	}

	y := &yielder{live: &busyNode{}}
	y.start()
	time.Sleep(20 * time.Millisecond) // a page of at least 20 ms: a rest of at least 380 ms
	began := time.Now()
	if err := y.yield(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rested := time.Since(began); rested < 380*time.Millisecond {
		t.Errorf("a busy node's simulation rested %v after a 20 ms page, want at least 380 ms", rested)
	}

	ctx, cancel := context.WithCancel(context.Background())
	y.start()
	time.Sleep(20 * time.Millisecond)
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if err := y.yield(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled rest: %v", err)
	}
}
