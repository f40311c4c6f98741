package broadcast

import (
	"context"
	"time"

	"svc/persistence/sharedstate"
)

// follow hands every message published on channel to deliver until ctx
// ends, subscribing again (a second after a failed attempt) when a
// subscription ends; missed, when set, runs each time one ends and each
// time a new one is made, since messages may have been missed in between.
func follow(ctx context.Context, shared sharedstate.State, channel string, deliver func([]byte), missed func()) {
	for ctx.Err() == nil {
		ch, err := shared.Subscribe(ctx, channel)
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
				continue
			}
		}
		if missed != nil {
			missed()
		}
		for raw := range ch {
			deliver(raw)
		}
		if missed != nil {
			missed()
		}
	}
}
