package httpapi

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// fakeRows is a table whose rows become visible in any order.
type fakeRows struct {
	rows    []watchRow // by seq
	visible map[int64]bool
	reads   int
}

func (f *fakeRows) add(seq int64, visible bool) {
	f.rows = append(f.rows, watchRow{seq: seq, id: fmt.Sprint("row-", seq)})
	slices.SortFunc(f.rows, func(a, b watchRow) int { return int(a.seq - b.seq) })
	f.visible[seq] = visible
}

func (f *fakeRows) list(_ context.Context, since int64, limit int) ([]watchRow, error) {
	f.reads++
	var out []watchRow
	for _, r := range f.rows {
		if r.seq > since && f.visible[r.seq] && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

// poll reads and sends like the watch loop, returning the seqs sent.
func poll(t *testing.T, c *watchCursor, f *fakeRows, now time.Time) []int64 {
	t.Helper()
	rows, err := c.read(context.Background(), f.list)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, r := range rows {
		c.sent(r)
		seqs = append(seqs, r.seq)
	}
	c.polled(now)
	return seqs
}

func TestWatchCursorLateRows(t *testing.T) {
	t0 := time.Now()
	f := &fakeRows{visible: map[int64]bool{}}
	f.add(1, true)
	c := newWatchCursor(1, 5*time.Second, t0) // row 1 existed before the stream
	f.add(2, false)                           // drawn first, committed last
	f.add(3, true)
	if got := poll(t, c, f, t0.Add(2*time.Second)); !slices.Equal(got, []int64{3}) {
		t.Fatalf("first poll sent %v, want [3]", got)
	}
	f.visible[2] = true
	f.add(4, true)
	if got := poll(t, c, f, t0.Add(4*time.Second)); !slices.Equal(got, []int64{2, 4}) {
		t.Fatalf("second poll sent %v, want the late row 2 and the new 4, each once", got)
	}
	if got := poll(t, c, f, t0.Add(6*time.Second)); len(got) != 0 {
		t.Fatalf("third poll sent %v again", got)
	}
	// Past the lag the sent ids are forgotten and reads start after them.
	poll(t, c, f, t0.Add(12*time.Second))
	if got := poll(t, c, f, t0.Add(14*time.Second)); len(got) != 0 || len(c.ids) != 0 || c.from() != 4 {
		t.Fatalf("after the lag: sent %v, %d ids kept, reading after %d; want nothing, 0, 4", got, len(c.ids), c.from())
	}
}

func TestWatchCursorWithoutLag(t *testing.T) {
	t0 := time.Now()
	f := &fakeRows{visible: map[int64]bool{}}
	c := newWatchCursor(-1, 0, t0) // no rows yet
	f.add(1, true)
	f.add(2, true)
	if got := poll(t, c, f, t0.Add(2*time.Second)); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("sent %v", got)
	}
	if got := poll(t, c, f, t0.Add(4*time.Second)); len(got) != 0 || c.from() != 2 || len(c.ids) != 0 {
		t.Fatalf("sent %v again; from %d; %d ids kept", got, c.from(), len(c.ids))
	}
}

func TestWatchCursorPages(t *testing.T) {
	t0 := time.Now()
	f := &fakeRows{visible: map[int64]bool{}}
	c := newWatchCursor(-1, 5*time.Second, t0)
	for i := range int64(2*watchPage + 7) {
		f.add(i+1, true)
	}
	if got := poll(t, c, f, t0.Add(2*time.Second)); len(got) != 2*watchPage+7 || f.reads != 3 {
		t.Fatalf("sent %d rows in %d reads, want %d in 3", len(got), f.reads, 2*watchPage+7)
	}
	if got := poll(t, c, f, t0.Add(4*time.Second)); len(got) != 0 {
		t.Fatalf("re-sent %d rows within the lag", len(got))
	}
}
