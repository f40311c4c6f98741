package correlate

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"
)

// Incident kinds (SPEC 6.3).
const (
	KindDenyStorm        = "deny_storm"
	KindRunaway          = "runaway"
	KindRepeatedApproval = "repeated_approval"
	KindTrustEscalation  = "trust_escalation"
)

// Incident severities, spelled as SPEC 2.3 shows them.
const (
	SeverityHigh   = "HIGH"
	SeverityMedium = "MEDIUM"
)

// EventKindAuthorizeDecision is the only observation kind that counts.
const EventKindAuthorizeDecision = "authorize_decision"

// Decision values the patterns look at (SPEC 2.3).
const (
	DecisionDeny            = "deny"
	DecisionRequireApproval = "require_approval"
)

// Thresholds and window lengths of SPEC 6.3.
const (
	DenyStormThreshold        = 5
	DenyStormWindow           = 60 * time.Second
	RunawayThreshold          = 10
	RunawayWindow             = 30 * time.Second
	RepeatedApprovalThreshold = 3
	RepeatedApprovalWindow    = 10 * time.Minute
	TrustEscalationWindow     = 30 * time.Second
)

// Memory caps (see the package documentation, "Memory bounds").
const (
	// MaxApprovalKeys caps the distinct tool and action pairs tracked for
	// repeated_approval.
	MaxApprovalKeys = 256
	// MaxTrustEntries caps the entries of the trust_escalation window.
	MaxTrustEntries = 16
)

// Observation is one event of the agent's stream, as the correlator actor
// receives it.
type Observation struct {
	EventID  string
	Kind     string // only authorize_decision counts
	Decision string
	Tool     string
	Action   string
	At       time.Time
}

// Incident is one pattern found. The actor adds tenant, agent, status and
// ids when it records it (CONTRACT §7).
type Incident struct {
	Kind           string
	Severity       string
	Summary        string
	SourceEventIDs []string // in time order
	At             time.Time
}

// Lengths reports how many entries each window holds, for tests and metrics.
type Lengths struct {
	DenyStorm        int
	Runaway          int
	RepeatedApproval int // entries over every tool and action key
	ApprovalKeys     int // tool and action keys tracked
	TrustEscalation  int
}

// Windows holds the sliding windows of one tenant and one agent. The zero
// value is ready to use.
type Windows struct {
	seen      bool
	latest    time.Time // newest At seen
	seq       uint64    // arrival counter
	deny      window
	runaway   window
	trust     window
	approvals map[approvalKey]*approvalWindow
}

type approvalKey struct{ tool, action string }

type approvalWindow struct {
	window
	touched uint64 // seq of the last observation for this key
}

type entry struct {
	id   string
	at   time.Time
	deny bool // trust window only: a deny (else a require_approval)
}

// window is a time-ordered list of entries; equal times keep arrival order.
type window struct {
	entries []entry
}

// Observe adds one observation and returns the incidents it completes (see
// the package documentation for the exact rules).
func (w *Windows) Observe(o Observation) []Incident {
	if o.Kind != EventKindAuthorizeDecision {
		return nil
	}
	w.seq++
	if !w.seen || o.At.After(w.latest) {
		w.latest, w.seen = o.At, true
	}
	// Every window but the tool and action ones is pruned on every
	// observation; those are pruned when touched or when the key cap needs
	// room.
	w.deny.prune(w.latest, DenyStormWindow)
	w.runaway.prune(w.latest, RunawayWindow)
	w.trust.prune(w.latest, TrustEscalationWindow)
	e := entry{id: o.EventID, at: o.At}
	var out []Incident

	if o.Decision == DecisionDeny {
		if run := w.observeCount(&w.deny, e, DenyStormThreshold, DenyStormWindow); run != nil {
			out = append(out, incident(KindDenyStorm, SeverityHigh, run,
				fmt.Sprintf("%d deny decisions within 60 seconds", len(run))))
		}
	}
	if run := w.observeCount(&w.runaway, e, RunawayThreshold, RunawayWindow); run != nil {
		out = append(out, incident(KindRunaway, SeverityHigh, run,
			fmt.Sprintf("%d actions within 30 seconds", len(run))))
	}
	if o.Decision == DecisionRequireApproval {
		if run := w.observeApproval(approvalKey{o.Tool, o.Action}, e); run != nil {
			out = append(out, incident(KindRepeatedApproval, SeverityMedium, run,
				fmt.Sprintf("%d require_approval decisions for tool %s action %s within 10 minutes", len(run), o.Tool, o.Action)))
		}
	}
	if o.Decision == DecisionDeny || o.Decision == DecisionRequireApproval {
		e.deny = o.Decision == DecisionDeny
		if ra, deny, ok := w.observeTrust(e); ok {
			out = append(out, incident(KindTrustEscalation, SeverityHigh, []entry{ra, deny},
				fmt.Sprintf("deny %s after require_approval (within 30 seconds)", deny.at.Sub(ra.at))))
		}
	}
	return out
}

// Idle reports whether no window holds anything that could still contribute
// to a pattern at now. It changes nothing.
func (w *Windows) Idle(now time.Time) bool {
	if w.deny.live(now, DenyStormWindow) || w.runaway.live(now, RunawayWindow) || w.trust.live(now, TrustEscalationWindow) {
		return false
	}
	for _, aw := range w.approvals {
		if aw.live(now, RepeatedApprovalWindow) {
			return false
		}
	}
	return true
}

// Len reports the number of entries each window holds.
func (w *Windows) Len() Lengths {
	l := Lengths{DenyStorm: len(w.deny.entries), Runaway: len(w.runaway.entries),
		ApprovalKeys: len(w.approvals), TrustEscalation: len(w.trust.entries)}
	for _, aw := range w.approvals {
		l.RepeatedApproval += len(aw.entries)
	}
	return l
}

func incident(kind, severity string, run []entry, summary string) Incident {
	ids := make([]string, len(run))
	for i, e := range run {
		ids[i] = e.id
	}
	return Incident{Kind: kind, Severity: severity, Summary: summary, SourceEventIDs: ids, At: run[len(run)-1].at}
}

// inWindow reports whether t is still inside a window of length span that
// ends at latest.
func (w *Windows) inWindow(t time.Time, span time.Duration) bool {
	return t.After(w.latest.Add(-span))
}

// observeCount adds e to a count window, already pruned at latest, and
// returns the k entries it completes, or nil. After pruning every entry lies
// within span of latest, so any k of them make the pattern; the window held
// at most k-1 entries before e (it fires as soon as it reaches k), so the
// incident is the whole window, and firing empties it.
func (w *Windows) observeCount(win *window, e entry, k int, span time.Duration) []entry {
	if !w.inWindow(e.at, span) {
		return nil
	}
	win.insert(e)
	if len(win.entries) < k {
		return nil
	}
	run := slices.Clone(win.entries)
	win.drop(len(win.entries))
	return run
}

func (w *Windows) observeApproval(key approvalKey, e entry) []entry {
	if !w.inWindow(e.at, RepeatedApprovalWindow) {
		return nil
	}
	aw := w.approvals[key]
	if aw == nil {
		if w.approvals == nil {
			w.approvals = map[approvalKey]*approvalWindow{}
		}
		if len(w.approvals) >= MaxApprovalKeys {
			w.evictApprovalKeys()
		}
		aw = &approvalWindow{}
		w.approvals[key] = aw
	}
	aw.touched = w.seq
	aw.prune(w.latest, RepeatedApprovalWindow)
	run := w.observeCount(&aw.window, e, RepeatedApprovalThreshold, RepeatedApprovalWindow)
	if len(aw.entries) == 0 {
		delete(w.approvals, key)
	}
	return run
}

// evictApprovalKeys removes every key whose entries all left the window and,
// if the map is still full, the least recently observed key.
func (w *Windows) evictApprovalKeys() {
	for k, aw := range w.approvals {
		if !aw.live(w.latest, RepeatedApprovalWindow) {
			delete(w.approvals, k)
		}
	}
	if len(w.approvals) < MaxApprovalKeys {
		return
	}
	var oldest approvalKey
	var touched uint64
	first := true
	for k, aw := range w.approvals {
		if first || aw.touched < touched {
			oldest, touched, first = k, aw.touched, false
		}
	}
	delete(w.approvals, oldest)
}

// observeTrust adds a deny or require_approval to the trust window, already
// pruned at latest, and returns the pair it completes.
func (w *Windows) observeTrust(e entry) (ra, deny entry, ok bool) {
	win := &w.trust
	if !w.inWindow(e.at, TrustEscalationWindow) {
		return entry{}, entry{}, false
	}
	// After pruning every entry lies within the window of latest, so any
	// require_approval followed by a deny in this window is an escalation.
	p := win.insert(e)
	es := win.entries
	end := -1
	if e.deny {
		for i := p - 1; i >= 0; i-- {
			if !es[i].deny {
				ra, deny, end = es[i], es[p], p
				break
			}
		}
	} else {
		for i := p + 1; i < len(es); i++ {
			if es[i].deny {
				ra, deny, end = es[p], es[i], i
				break
			}
		}
	}
	if end >= 0 {
		win.drop(end + 1)
		return ra, deny, true
	}
	if n := len(win.entries); n > MaxTrustEntries {
		win.drop(n - MaxTrustEntries)
	}
	return entry{}, entry{}, false
}

// insert places e after every entry at or before e.at and returns its index.
func (win *window) insert(e entry) int {
	i := sort.Search(len(win.entries), func(j int) bool { return win.entries[j].at.After(e.at) })
	win.entries = slices.Insert(win.entries, i, e)
	return i
}

// prune drops the entries that left a window of length span ending at latest.
func (win *window) prune(latest time.Time, span time.Duration) {
	cut := latest.Add(-span)
	i := 0
	for i < len(win.entries) && !win.entries[i].at.After(cut) {
		i++
	}
	win.drop(i)
}

// drop removes the first n entries, keeping the backing array.
func (win *window) drop(n int) {
	if n == 0 {
		return
	}
	m := copy(win.entries, win.entries[n:])
	clear(win.entries[m:])
	win.entries = win.entries[:m]
}

// live reports whether an entry could still share a window of length span
// with an observation at now.
func (win *window) live(now time.Time, span time.Duration) bool {
	n := len(win.entries)
	return n > 0 && win.entries[n-1].at.After(now.Add(-span))
}

// windowsJSON is the encoding of Windows: times in Unix nanoseconds,
// entries in window order, approval keys in no particular order.
type windowsJSON struct {
	Seen      bool           `json:"seen,omitempty"`
	Latest    int64          `json:"latest_ns,omitempty"`
	Seq       uint64         `json:"seq,omitempty"`
	Deny      []entryJSON    `json:"deny,omitempty"`
	Runaway   []entryJSON    `json:"runaway,omitempty"`
	Trust     []entryJSON    `json:"trust,omitempty"`
	Approvals []approvalJSON `json:"approvals,omitempty"`
}

type entryJSON struct {
	ID   string `json:"id"`
	At   int64  `json:"at_ns"`
	Deny bool   `json:"deny,omitempty"`
}

type approvalJSON struct {
	Tool    string      `json:"tool"`
	Action  string      `json:"action"`
	Touched uint64      `json:"touched"`
	Entries []entryJSON `json:"entries"`
}

func encodeEntries(es []entry) []entryJSON {
	out := make([]entryJSON, len(es))
	for i, e := range es {
		out[i] = entryJSON{ID: e.id, At: e.at.UnixNano(), Deny: e.deny}
	}
	return out
}

func decodeEntries(es []entryJSON) ([]entry, error) {
	out := make([]entry, len(es))
	for i, e := range es {
		out[i] = entry{id: e.ID, at: time.Unix(0, e.At).UTC(), deny: e.Deny}
		if i > 0 && out[i].at.Before(out[i-1].at) {
			return nil, fmt.Errorf("correlate: window entries out of time order at %d", i)
		}
	}
	return out, nil
}

// MarshalJSON encodes the windows, so that the nodes of an installation can
// share one agent's windows (the caller stores them; Windows itself is not
// safe for concurrent use).
func (w *Windows) MarshalJSON() ([]byte, error) {
	out := windowsJSON{Seen: w.seen, Seq: w.seq, Deny: encodeEntries(w.deny.entries),
		Runaway: encodeEntries(w.runaway.entries), Trust: encodeEntries(w.trust.entries)}
	if w.seen {
		out.Latest = w.latest.UnixNano()
	}
	for k, aw := range w.approvals {
		out.Approvals = append(out.Approvals, approvalJSON{Tool: k.tool, Action: k.action, Touched: aw.touched, Entries: encodeEntries(aw.entries)})
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes what MarshalJSON wrote, replacing w's windows.
func (w *Windows) UnmarshalJSON(data []byte) error {
	var in windowsJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	if len(in.Approvals) > MaxApprovalKeys {
		return fmt.Errorf("correlate: %d approval keys, at most %d", len(in.Approvals), MaxApprovalKeys)
	}
	out := Windows{seen: in.Seen, seq: in.Seq}
	if in.Seen {
		out.latest = time.Unix(0, in.Latest).UTC()
	}
	var err error
	for _, f := range []struct {
		dst *window
		src []entryJSON
	}{{&out.deny, in.Deny}, {&out.runaway, in.Runaway}, {&out.trust, in.Trust}} {
		if f.dst.entries, err = decodeEntries(f.src); err != nil {
			return err
		}
	}
	for _, a := range in.Approvals {
		es, err := decodeEntries(a.Entries)
		if err != nil {
			return err
		}
		if out.approvals == nil {
			out.approvals = map[approvalKey]*approvalWindow{}
		}
		out.approvals[approvalKey{a.Tool, a.Action}] = &approvalWindow{window: window{entries: es}, touched: a.Touched}
	}
	*w = out
	return nil
}
