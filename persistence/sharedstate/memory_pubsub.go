package sharedstate

import (
	"context"
	"fmt"
)

// Publish implements [State]: it reaches this process's subscribers only.
func (m *Memory) Publish(ctx context.Context, channel string, msg []byte) error {
	if err := m.check(ctx, "publish"); err != nil {
		return err
	}
	m.psMu.Lock()
	f := m.topics[channel]
	m.psMu.Unlock()
	if f != nil {
		deliver(f, msg)
	}
	return nil
}

// Subscribe implements [State].
func (m *Memory) Subscribe(ctx context.Context, channel string) (<-chan []byte, error) {
	if err := m.check(ctx, "subscribe"); err != nil {
		return nil, err
	}
	m.psMu.Lock()
	if m.closed.Load() { // Close may have run since check
		m.psMu.Unlock()
		return nil, fmt.Errorf("%w: subscribe", ErrClosed)
	}
	f := m.topics[channel]
	if f == nil {
		f = newFanout(&m.dropped)
		m.topics[channel] = f
	}
	s := f.add()
	m.psMu.Unlock()

	go func() {
		select {
		case <-ctx.Done():
		case <-m.stop: // Close closes every channel
			return
		}
		m.psMu.Lock()
		if f.remove(s) == 0 && m.topics[channel] == f {
			delete(m.topics, channel)
		}
		m.psMu.Unlock()
	}()
	return s.ch, nil
}
