package broadcast

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"svc/messages"
	"svc/testkit"
)

// quietSystem is an actor system whose own log goes nowhere.
func quietSystem() *actor.ActorSystem {
	return actor.NewActorSystemWithConfig(actor.Configure(actor.WithLoggerFactory(
		func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) })))
}

func TestEventBusNeverBlocks(t *testing.T) {
	sys := quietSystem()
	bus := NewEventBus(sys.Root, 4)
	for i := 0; i < 10; i++ {
		bus.Publish(messages.AseEvent{EventID: "e"})
	}
	if bus.Published() != 4 || bus.Dropped() != 6 || bus.Depth() != 4 {
		t.Fatalf("published %d dropped %d depth %d", bus.Published(), bus.Dropped(), bus.Depth())
	}
	var got atomic.Int32
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*messages.AseEvent); ok {
			got.Add(1)
		}
	}))
	bus.Subscribe(pid)
	stop := make(chan struct{})
	close(stop)
	bus.Run(stop)
	testkit.Eventually(t, 2*time.Second, "delivery", func() bool { return got.Load() == 4 })
}
