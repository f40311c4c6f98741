package runstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Entry is one of a run's latest calls; Seq 0 is an empty entry. It holds
// no pointer: it names its call's (tool, action) by the run's tool entry
// Ti, and its decision by a code. A ring is then memory the collector never
// scans; the rings of tens of thousands of live runs, three strings an
// entry, were most of what it marked of the run state.
type Entry struct {
	Seq int64
	At  int64
	Lv  int32
	M   uint8
	D   uint8 // the decision's code ([verdictCode]), 0 until settled
	Ti  uint8 // the run's Tools[Ti] names the call's (tool, action)
}

// newEntry is the entry of the call at seq: at, its level (one out of
// range counts as none, as [Run.taint] ignores it), mut (0 or 1) and its
// tool entry's index ti. It reports false when mut or ti is out of range.
func newEntry(seq, at int64, level, mut, ti int) (Entry, bool) {
	e := Entry{Seq: seq, At: at}
	if level > 0 && level <= LevelMalicious {
		e.Lv = int32(level)
	}
	if mut < 0 || mut > 1 || ti < 0 || ti > math.MaxUint8 {
		return e, false
	}
	e.M, e.Ti = uint8(mut), uint8(ti)
	return e, true
}

// Ring is a run's latest calls: at most one per seq modulo [Recent] (the
// script's key), in no order.
type Ring []Entry

// put records e in the slot of its seq modulo [Recent].
func (g *Ring) put(e Entry) {
	for i := range *g {
		if (*g)[i].Seq%Recent == e.Seq%Recent {
			(*g)[i] = e
			return
		}
	}
	*g = append(*g, e)
}

// names reports whether an entry other than the one that seq's call
// replaces names the tool entry i.
func (g Ring) names(i int, seq int64) bool {
	for _, e := range g {
		if e.Seq != 0 && int(e.Ti) == i && e.Seq%Recent != seq%Recent {
			return true
		}
	}
	return false
}

// namesOnly returns the index of a names-only tool entry (the run counts
// [MaxTools] pairs already) for the call at seq. It reuses one that no
// other recent entry names, so that a run keeps at most [Recent] + 1 of
// them.
func (r *Run) namesOnly(tool, action string, seq int64) int {
	for i := range r.Tools {
		if r.Tools[i].X && !r.Recent.names(i, seq) {
			r.Tools[i] = Tool{T: tool, A: action, X: true}
			return i
		}
	}
	r.Tools = append(r.Tools, Tool{T: tool, A: action, X: true})
	return len(r.Tools) - 1
}

// The decisions' codes in an [Entry].
const (
	verdictPending uint8 = iota
	verdictAllow
	verdictDeny
	verdictApproval
	verdictRedact
	verdictQuarantine
)

// verdictCode is decision's code; a decision outside SPEC's five (none
// is settled) reads as pending.
func verdictCode(decision string) uint8 {
	switch decision {
	case "allow":
		return verdictAllow
	case "deny":
		return verdictDeny
	case "require_approval":
		return verdictApproval
	case "redact":
		return verdictRedact
	case "quarantine":
		return verdictQuarantine
	}
	return verdictPending
}

// verdictName is the decision a code stands for, "pending" for none.
func verdictName(c uint8) string {
	switch c {
	case verdictAllow:
		return "allow"
	case verdictDeny:
		return "deny"
	case verdictApproval:
		return "require_approval"
	case verdictRedact:
		return "redact"
	case verdictQuarantine:
		return "quarantine"
	}
	return "pending"
}

// wireEntry is an [Entry] as the Valkey script keeps it, by name.
type wireEntry struct {
	T   string `json:"t"`
	A   string `json:"a"`
	D   string `json:"d"` // "" until settled
	Seq int64  `json:"s"`
	M   int    `json:"m"`
	Lv  int    `json:"lv"`
	At  int64  `json:"at"`
}

// UnmarshalJSON reads the script's run state. Its recent entries (the map
// "seq modulo Recent" → entry) name their tool and action; each becomes
// the index of the run's tool entry of that name, a names-only one for a
// pair the run does not count.
func (r *Run) UnmarshalJSON(b []byte) error {
	type plain Run
	w := struct {
		*plain
		Recent json.RawMessage `json:"rc"`
	}{plain: (*plain)(r)}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	var entries []wireEntry
	if len(w.Recent) > 0 {
		if err := decodeMembers(w.Recent, &entries, value[wireEntry]); err != nil {
			return fmt.Errorf("rc: %w", err)
		}
	}
	r.Recent = nil
	for _, e := range entries {
		ti := r.toolAt(e.T, e.A)
		if ti < 0 {
			ti = r.namesOnly(e.T, e.A, e.Seq)
		}
		n, ok := newEntry(e.Seq, e.At, e.Lv, e.M, ti)
		if !ok || e.Lv < 0 || e.Lv > LevelMalicious {
			return errors.New("runstate: a recent entry out of range")
		}
		n.D = verdictCode(e.D)
		r.Recent = append(r.Recent, n)
	}
	return nil
}
