package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// tick is sent by a periodic actor's ticker to the actor itself.
type tick struct{}

// ticker sends tick to the actor every interval until stopped.
type ticker struct{ stop chan struct{} }

func startTicker(ctx actor.Context, every time.Duration) *ticker {
	t := &ticker{stop: make(chan struct{})}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	go func() {
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			select {
			case <-t.stop:
				return
			case <-tk.C:
				root.Send(self, tick{})
			}
		}
	}()
	return t
}

func (t *ticker) Stop() {
	if t != nil {
		close(t.stop)
	}
}

// ioContext bounds a background task's I/O, detached from any request.
func ioContext(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
