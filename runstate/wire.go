package runstate

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strconv"
)

// The Valkey script keeps a run's and an agent's state as JSON objects
// keyed as Lua tables are (wire names in the struct tags of state.go); a
// store decodes them into the compact types here. Encoding is never needed:
// the script folds, and the in-process store keeps the structs.

// Named is a name with the seq it first appeared at (a run's agents and
// labels).
type Named struct {
	Name string
	Seq  int64
}

// Sum is one accumulated parameter of a run.
type Sum struct {
	Key string
	V   Num
}

// Seen is an attempt id a run remembers: its hash (see [attemptHash]) and
// the attempt's seq.
type Seen struct {
	H   uint64
	Seq int64
}

// NamedSet is a run's agents or labels (the script's map name → seq).
type NamedSet []Named

// ToolSet is a run's (tool, action) counts (the script's map by
// [ToolKey]).
type ToolSet []Tool

// SumSet is a run's accumulated parameters (the script's map key → sum).
type SumSet []Sum

// SeenSet is the attempt ids a run remembers (the script's map id → seq).
type SeenSet []Seen

// seenSeed hashes attempt ids. The hashes never leave the process: the
// script keeps the ids themselves.
var seenSeed = maphash.MakeSeed()

// attemptHash is an attempt id's 64-bit hash. Two ids of one run's last
// [Dedup] that share a hash (about 64 in 2^64 per call) would count as one
// attempt.
func attemptHash(id string) uint64 { return maphash.String(seenSeed, id) }

func (s NamedSet) has(name string) bool {
	for _, n := range s {
		if n.Name == name {
			return true
		}
	}
	return false
}

// members decodes a JSON object (or the empty array an empty Lua table may
// be written as) member by member, in key order.
func members(b []byte, each func(key string, raw json.RawMessage) error) error {
	if string(b) == "null" || string(b) == "[]" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	for _, k := range sortedKeys(m) {
		if err := each(k, m[k]); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// decodeMembers sets *out to one element per member of the JSON object b,
// in key order, each filled by fill from the member's key and value.
func decodeMembers[T any](b []byte, out *[]T, fill func(key string, raw json.RawMessage, t *T) error) error {
	*out = nil
	return members(b, func(k string, raw json.RawMessage) error {
		var t T
		if err := fill(k, raw, &t); err != nil {
			return err
		}
		*out = append(*out, t)
		return nil
	})
}

// value fills t from the member's value alone.
func value[T any](_ string, raw json.RawMessage, t *T) error { return json.Unmarshal(raw, t) }

// UnmarshalJSON reads the script's map name → seq.
func (s *NamedSet) UnmarshalJSON(b []byte) error {
	return decodeMembers(b, (*[]Named)(s), func(k string, raw json.RawMessage, n *Named) error {
		n.Name = k
		return json.Unmarshal(raw, &n.Seq)
	})
}

// UnmarshalJSON reads the script's map key → tool count.
func (s *ToolSet) UnmarshalJSON(b []byte) error { return decodeMembers(b, (*[]Tool)(s), value[Tool]) }

// UnmarshalJSON reads the script's map key → sum.
func (s *SumSet) UnmarshalJSON(b []byte) error {
	return decodeMembers(b, (*[]Sum)(s), func(k string, raw json.RawMessage, sum *Sum) error {
		sum.Key = k
		return json.Unmarshal(raw, &sum.V)
	})
}

// UnmarshalJSON reads the script's map id → seq, keeping the ids' hashes.
func (s *SeenSet) UnmarshalJSON(b []byte) error {
	return decodeMembers(b, (*[]Seen)(s), func(k string, raw json.RawMessage, seen *Seen) error {
		seen.H = attemptHash(k)
		return json.Unmarshal(raw, &seen.Seq)
	})
}

// UnmarshalJSON reads the script's map "bucket index modulo the slot
// count" → slot.
func (w *Window) UnmarshalJSON(b []byte) error { return decodeMembers(b, (*[]Slot)(w), value[Slot]) }

// UnmarshalJSON reads the script's map level → source.
func (s *Sources) UnmarshalJSON(b []byte) error {
	return decodeMembers(b, (*[]Source)(s), func(k string, raw json.RawMessage, src *Source) error {
		lv, err := strconv.Atoi(k)
		if err != nil || lv < 1 || lv > LevelMalicious {
			return fmt.Errorf("level %q out of range", k)
		}
		src.Lv = lv
		return json.Unmarshal(raw, src)
	})
}

// UnmarshalJSON reads the last allowed call (absent or null: none).
func (a *Allowed) UnmarshalJSON(b []byte) error {
	*a = Allowed{}
	if string(b) == "null" || string(b) == "[]" {
		return nil
	}
	type plain Allowed
	if err := json.Unmarshal(b, (*plain)(a)); err != nil {
		return err
	}
	a.Set = true
	return nil
}

// Num is an accumulated sum. The Valkey script keeps it as a string of 17
// significant digits (exact for a float64), which Num also reads.
type Num float64

// UnmarshalJSON reads a number or a string holding one.
func (n *Num) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		b = b[1 : len(b)-1]
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return err
	}
	*n = Num(f)
	return nil
}
