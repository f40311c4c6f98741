package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"svc/persistence"
)

// writeBuffered keeps a batch the database could not take now, and drops
// only the items that can never be written.
func TestWriteBufferedKeepsTransientAndDropsOnlyTheUnwritable(t *testing.T) {
	never := errors.New("foreign key: no such tenant")
	busy := fmt.Errorf("%w: locked", persistence.ErrBusy)
	tests := []struct {
		name      string
		all       error
		each      map[int]error
		keep      []int
		dropped   []int
		eachCalls int
	}{
		{name: "written at once", all: nil},
		{name: "busy: all kept, none tried alone", all: busy, keep: []int{1, 2, 3}},
		{name: "one unwritable: the others written, it dropped", all: never, each: map[int]error{2: never}, dropped: []int{2}, eachCalls: 3},
		{name: "one unwritable, one busy alone", all: never, each: map[int]error{1: busy, 3: never}, keep: []int{1}, dropped: []int{3}, eachCalls: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var dropped []int
			calls := 0
			keep, err := writeBuffered([]int{1, 2, 3},
				func(_ context.Context, items []int) error {
					if len(items) > 1 {
						return tc.all
					}
					calls++
					return tc.each[items[0]]
				},
				func(i int, _ error) { dropped = append(dropped, i) })
			if !slices.Equal(keep, tc.keep) || !slices.Equal(dropped, tc.dropped) || calls != tc.eachCalls {
				t.Fatalf("kept %v, dropped %v, %d tried alone; want %v, %v, %d", keep, dropped, calls, tc.keep, tc.dropped, tc.eachCalls)
			}
			if (len(keep) > 0) != (err != nil) {
				t.Fatalf("kept %v with error %v", keep, err)
			}
		})
	}
}
