package sharedstate

import (
	"context"
	"sort"
	"time"
)

// windowEntry returns the sorted-set entry at key, created empty when
// absent; another kind of entry is ErrWrongType.
func (sh *memShard) windowEntry(op, key string, now time.Time) (*memEntry, error) {
	e := sh.lookup(key, now)
	if e == nil {
		e = &memEntry{kind: kindWindow, window: make(map[string]int64)}
		sh.m[key] = e
	} else if e.kind != kindWindow {
		return nil, wrongType(op, key)
	}
	return e, nil
}

// WindowAdd implements [State]. The window expires window after the call on
// the process clock. Each call scans the window's entries, which suits the
// windows kept here (tens to thousands of events).
func (m *Memory) WindowAdd(ctx context.Context, key, member string, at time.Time, window time.Duration) (int64, error) {
	if err := m.check(ctx, "window add"); err != nil {
		return 0, err
	}
	if err := validWindow("window add", window); err != nil {
		return 0, err
	}
	now := time.Now()
	score := at.UnixMicro()
	cutoff := score - window.Microseconds()
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, err := sh.windowEntry("window add", key, now)
	if err != nil {
		return 0, err
	}
	e.window[member] = score
	for mb, s := range e.window {
		if s < cutoff {
			delete(e.window, mb)
		}
	}
	e.expires = now.Add(time.Duration(millis(window)) * time.Millisecond)
	return int64(len(e.window)), nil
}

// Seen implements [State].
func (m *Memory) Seen(ctx context.Context, key string) ([]string, error) {
	if err := m.check(ctx, "seen"); err != nil {
		return nil, err
	}
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.lookup(key, time.Now())
	if e == nil {
		return nil, nil
	}
	if e.kind != kindWindow {
		return nil, wrongType("seen", key)
	}
	out := make([]string, 0, len(e.window))
	for mb := range e.window {
		out = append(out, mb)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := e.window[out[i]], e.window[out[j]]
		return a > b || (a == b && out[i] > out[j])
	})
	return out, nil
}

// MarkSeen implements [State]. The set is a window entry (as a sorted set
// is in Valkey), scored by at in Unix microseconds; going over limit scans
// it, which suits the sets kept here (up to thousands of members).
func (m *Memory) MarkSeen(ctx context.Context, key, member string, at time.Time, limit int, ttl time.Duration) (bool, error) {
	if err := m.check(ctx, "mark seen"); err != nil {
		return false, err
	}
	if err := validSeen(limit, ttl); err != nil {
		return false, err
	}
	now := time.Now()
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e, err := sh.windowEntry("mark seen", key, now)
	if err != nil {
		return false, err
	}
	score := at.UnixMicro()
	old, seen := e.window[member]
	if !seen || score > old {
		e.window[member] = score
	}
	for len(e.window) > limit {
		first, least := true, ""
		for mb, sc := range e.window {
			if first || sc < e.window[least] || (sc == e.window[least] && mb < least) {
				first, least = false, mb
			}
		}
		delete(e.window, least)
	}
	e.expires = now.Add(time.Duration(millis(ttl)) * time.Millisecond)
	return !seen, nil
}
