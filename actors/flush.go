package actors

import (
	"context"
	"time"
)

// writeBuffered writes a buffered batch (audit events, alerts, incidents)
// with write and returns what to keep for the next flush. A busy or
// unreachable database keeps the whole batch. Any other failure is followed
// by writing the items one by one: those that then fail transiently are
// kept; those that fail otherwise can never be written (one of a tenant
// deleted while it was buffered: the foreign key refuses it), so they go to
// drop instead of failing every later flush, and every item buffered after
// them with it.
func writeBuffered[T any](items []T, write func(context.Context, []T) error, drop func(T, error)) ([]T, error) {
	if len(items) == 0 {
		return nil, nil
	}
	c, cancel := ioContext(10 * time.Second)
	err := write(c, items)
	cancel()
	switch {
	case err == nil:
		return nil, nil
	case transient(err):
		return items, err
	}
	var keep []T
	var last error
	for i, it := range items {
		c, cancel := ioContext(10 * time.Second)
		err := write(c, items[i:i+1])
		cancel()
		switch {
		case err == nil:
		case transient(err):
			keep, last = append(keep, it), err
		default:
			drop(it, err)
		}
	}
	return keep, last
}
