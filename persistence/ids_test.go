package persistence

import (
	"testing"

	"github.com/google/uuid"
)

// Record ids are UUID v7 and grow in the order they are made, so an index
// on them is appended at its end.
func TestNewRecordIDOrdered(t *testing.T) {
	prev := ""
	for range 10_000 {
		id := NewRecordID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 {
			t.Fatalf("%q: version %v, err %v; want a UUID v7", id, u.Version(), err)
		}
		if id <= prev {
			t.Fatalf("%s made after %s sorts before it", id, prev)
		}
		prev = id
	}
}
