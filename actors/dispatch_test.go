package actors

import (
	"sync"
	"testing"
	"time"

	"svc/testkit"

	"github.com/asynkron/protoactor-go/actor"
)

// Schedule never blocks: 100 runs that all wait for one another each get a
// goroutine of their own.
func TestReusingDispatcherNeverBlocks(t *testing.T) {
	d := newReusingDispatcher(10, time.Minute)
	var all, release sync.WaitGroup
	all.Add(100)
	release.Add(1)
	for range 100 {
		d.Schedule(func() {
			all.Done()
			release.Wait()
		})
	}
	all.Wait() // every run started while the others were still running
	if got := d.Started(); got != 100 {
		t.Fatalf("started %d goroutines for 100 concurrent runs, want 100", got)
	}
	release.Done()
}

// Runs one after another reuse the same goroutine, and an idle goroutine
// exits after the idle timeout.
func TestReusingDispatcherReusesAndRetires(t *testing.T) {
	d := newReusingDispatcher(10, 200*time.Millisecond)
	done := make(chan struct{})
	for range 50 {
		d.Schedule(func() { done <- struct{}{} })
		<-done
	}
	if got := d.Started(); got > 25 {
		t.Fatalf("50 sequential runs started %d goroutines; they should mostly reuse one", got)
	}
	testkit.Eventually(t, 10*time.Second, "the idle goroutine to exit", func() bool { return d.Live() == 0 })
	d.Schedule(func() { done <- struct{}{} })
	<-done
	if d.Live() != 1 {
		t.Fatalf("live = %d after a run past the idle timeout, want 1 (a new goroutine)", d.Live())
	}
}

// Actors run on it as on the default dispatcher: messages in order, one at
// a time.
func TestReusingDispatcherRunsActors(t *testing.T) {
	system := actor.NewActorSystem()
	d := newReusingDispatcher(5, time.Minute)
	var mu sync.Mutex
	var got []int
	busy := false
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if n, ok := ctx.Message().(int); ok {
			mu.Lock()
			if busy {
				t.Error("two messages processed at once")
			}
			busy = true
			got = append(got, n)
			busy = false
			mu.Unlock()
			if n == 999 {
				ctx.Respond(true)
			}
		}
	}, actor.WithDispatcher(d)))
	for i := range 1000 {
		system.Root.Send(pid, i)
	}
	if _, err := system.Root.RequestFuture(pid, 999, 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range 1000 {
		if got[i] != i {
			t.Fatalf("message %d arrived as %d", i, got[i])
		}
	}
}
