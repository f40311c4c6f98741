package detect

import (
	"container/list"
	"encoding/json"
	"fmt"
	"time"
)

// Behavioural anomaly names (SPEC 6.2), used as both rule key and alert
// name of the alerts a Baseline raises.
const (
	AnomalyNewTool = "behavioral_anomaly_new_tool"
	AnomalyRate    = "behavioral_anomaly_rate"
)

// Baseline defaults and fixed parameters.
const (
	// DefaultBaselineWindow is the length of a rate window.
	DefaultBaselineWindow = 60 * time.Second
	// DefaultBaselineMaxPairs bounds the tool and action pairs remembered.
	DefaultBaselineMaxPairs = 1024
	// DefaultBaselineHistory bounds the completed windows remembered.
	DefaultBaselineHistory = 60
	// BaselineMinHistory is the number of completed windows needed before
	// the rate anomaly can fire; a smaller history option is raised to it.
	BaselineMinHistory = 3
	// BaselineRateFactor: the rate anomaly fires when the current window's
	// count exceeds this many times the historical mean.
	BaselineRateFactor = 3
)

// BaselineOptions configure NewBaselineWithOptions; a zero or negative
// field takes its default.
type BaselineOptions struct {
	Window         time.Duration // default DefaultBaselineWindow
	MaxPairs       int           // default DefaultBaselineMaxPairs
	HistoryWindows int           // default DefaultBaselineHistory; at least BaselineMinHistory
}

// withDefaults fills in the defaults (the validate step of parse, validate,
// construct).
func (o BaselineOptions) withDefaults() BaselineOptions {
	if o.Window <= 0 {
		o.Window = DefaultBaselineWindow
	}
	if o.MaxPairs <= 0 {
		o.MaxPairs = DefaultBaselineMaxPairs
	}
	if o.HistoryWindows <= 0 {
		o.HistoryWindows = DefaultBaselineHistory
	}
	o.HistoryWindows = max(o.HistoryWindows, BaselineMinHistory)
	return o
}

// Anomaly is one behavioural alert raised by Baseline.Observe.
type Anomaly struct {
	Name     string // AnomalyNewTool or AnomalyRate; the alert name and rule key
	Severity string // SeverityInfo (new tool) or SeverityHigh (rate)

	Tool   string // the event's tool and action
	Action string

	// For AnomalyRate: the current window, its count including this event,
	// and the mean count of the completed windows it was compared with.
	WindowStart      time.Time
	WindowCount      int
	HistoricalMean   float64
	CompletedWindows int
}

type pairKey struct{ tool, action string }

// Baseline is the behavioural baseline of ONE tenant and agent (SPEC 6.2).
// It is pure: the caller feeds it events and the time, and routes each
// agent's events to its own Baseline. It is not safe for concurrent use
// (one actor owns it). The zero Baseline is ready to use with the default
// options.
//
// Only authorize_decision events count; Observe ignores other kinds.
//
// New tool: the first time an agent uses a tool and action pair since the
// Baseline was created, Observe reports AnomalyNewTool (INFO). At most
// MaxPairs pairs are remembered; when a new pair would exceed that, the
// least recently used pair is forgotten, and reported as new again if it
// comes back. Remember records a pair without an anomaly (to warm up a
// Baseline from stored decisions).
//
// Rate: time is cut into windows of Window (default 60 s), aligned with
// time.Truncate (so 60 s windows start on the minute). The event's window
// is the current window; a time before it (a late event) counts in the
// current window. When an event falls in a later window, the current one
// is completed and pushed onto the history, which keeps the last
// HistoryWindows completed windows (default 60). Only windows that saw an
// event are recorded: idle windows are skipped, so the mean is the agent's
// count per active window, and an agent that is quiet for an hour and then
// makes one call does not look like a burst. Once the history holds at
// least BaselineMinHistory (3) windows, Observe reports AnomalyRate (HIGH)
// for the event whose arrival makes the current window's count exceed
// BaselineRateFactor (3) times the history's mean, strictly: with a mean
// of 2, the 7th event of the window fires and the 6th does not. It fires
// at most once per window.
type Baseline struct {
	opts  BaselineOptions
	ready bool

	// The pairs seen, most recently used last: in few, a short slice,
	// while they number at most fewPairs (most agents call a handful of
	// tools, and a map with a list cost about 400 bytes of each of a
	// hundred thousand agents); past it, in pairs and lru.
	few   []pairKey
	pairs map[pairKey]*list.Element // values of lru: pairKey
	lru   *list.List                // front: most recently used

	rate Rate
}

// Rate is the rate half of a Baseline, on its own for a baseline whose
// tool and action pairs are kept elsewhere (an installation-wide set): the
// caller decides whether the pair is new and calls [Rate.Observe]. It
// encodes to JSON and back (MarshalJSON), so that nodes can share it. The
// zero Rate is ready to use with the default options.
type Rate struct {
	window  time.Duration
	histCap int

	started   bool
	curStart  time.Time
	curCount  int
	rateFired bool

	history []int // ring of completed window counts
	histPos int   // next write position
	histLen int
	histSum int
}

// NewBaseline returns an empty Baseline with the default options.
func NewBaseline() *Baseline { return NewBaselineWithOptions(BaselineOptions{}) }

// NewBaselineWithOptions returns an empty Baseline with opts (zero fields
// take their defaults).
func NewBaselineWithOptions(opts BaselineOptions) *Baseline {
	b := &Baseline{opts: opts}
	b.init()
	return b
}

// NewRate returns an empty Rate with opts' Window and HistoryWindows (zero
// fields take their defaults; MaxPairs is not used).
func NewRate(opts BaselineOptions) Rate {
	o := opts.withDefaults()
	return Rate{window: o.Window, histCap: o.HistoryWindows}
}

func (b *Baseline) init() {
	if b.ready {
		return
	}
	b.opts = b.opts.withDefaults()
	b.rate = NewRate(b.opts)
	b.ready = true
}

// init fills in a zero Rate's defaults.
func (r *Rate) init() {
	if r.window <= 0 || r.histCap <= 0 {
		*r = NewRate(BaselineOptions{})
	}
}

// Observe feeds one event seen at now and returns the anomalies it raises:
// none, AnomalyNewTool, AnomalyRate, or both in that order. Events of
// kinds other than authorize_decision are ignored.
func (b *Baseline) Observe(e Event, now time.Time) []Anomaly {
	if e.Kind != KindAuthorizeDecision {
		return nil
	}
	b.init()
	return b.rate.Observe(e, now, b.touch(pairKey{e.Tool, e.Action}))
}

// Observe counts one event seen at now and returns the anomalies it
// raises, as [Baseline.Observe] does, with the event's tool and action pair
// new when newPair says so. Events of kinds other than authorize_decision
// are ignored.
func (r *Rate) Observe(e Event, now time.Time, newPair bool) []Anomaly {
	if e.Kind != KindAuthorizeDecision {
		return nil
	}
	r.init()
	r.advance(now)
	r.curCount++

	var out []Anomaly
	if newPair {
		out = append(out, Anomaly{
			Name: AnomalyNewTool, Severity: SeverityInfo, Tool: e.Tool, Action: e.Action,
			WindowStart: r.curStart, WindowCount: r.curCount,
			HistoricalMean: r.mean(), CompletedWindows: r.histLen,
		})
	}
	// count > factor × sum/len, in integers.
	if !r.rateFired && r.histLen >= BaselineMinHistory &&
		r.curCount*r.histLen > BaselineRateFactor*r.histSum {
		r.rateFired = true
		out = append(out, Anomaly{
			Name: AnomalyRate, Severity: SeverityHigh, Tool: e.Tool, Action: e.Action,
			WindowStart: r.curStart, WindowCount: r.curCount,
			HistoricalMean: r.mean(), CompletedWindows: r.histLen,
		})
	}
	return out
}

// Remember records the tool and action pair as known, without an anomaly
// and without counting towards the rate.
func (b *Baseline) Remember(tool, action string) {
	b.init()
	b.touch(pairKey{tool, action})
}

// touch marks the pair as most recently used and reports whether it was
// new, evicting the least recently used pair when over the bound.
func (b *Baseline) touch(k pairKey) bool {
	if b.pairs == nil {
		return b.touchFew(k)
	}
	if el, ok := b.pairs[k]; ok {
		b.lru.MoveToFront(el)
		return false
	}
	b.pairs[k] = b.lru.PushFront(k)
	if b.lru.Len() > b.opts.MaxPairs {
		if old, ok := b.lru.Remove(b.lru.Back()).(pairKey); ok {
			delete(b.pairs, old)
		}
	}
	return true
}

// remembered is how many pairs the baseline knows.
func (b *Baseline) remembered() int {
	if b.pairs == nil {
		return len(b.few)
	}
	return len(b.pairs)
}

// fewPairs is how many pairs a baseline keeps in its slice.
const fewPairs = 16

// touchFew is touch while the pairs are in the slice: a known pair moves
// to the end, a new one is appended (evicting the least recently used past
// MaxPairs), and past fewPairs they move to the map and list.
func (b *Baseline) touchFew(k pairKey) bool {
	for i, p := range b.few {
		if p == k {
			copy(b.few[i:], b.few[i+1:])
			b.few[len(b.few)-1] = k
			return false
		}
	}
	b.few = append(b.few, k)
	if len(b.few) > b.opts.MaxPairs {
		b.few = append(b.few[:0], b.few[1:]...)
	}
	if len(b.few) > fewPairs {
		b.pairs, b.lru = make(map[pairKey]*list.Element, len(b.few)), list.New()
		for _, p := range b.few {
			b.pairs[p] = b.lru.PushFront(p)
		}
		b.few = nil
	}
	return true
}

// advance moves the current window to the one holding now, completing the
// current window when now is in a later one.
func (r *Rate) advance(now time.Time) {
	start := now.Truncate(r.window)
	if !r.started {
		r.started = true
		r.curStart = start
		return
	}
	if !start.After(r.curStart) {
		return // same window, or a late event: count it in the current one
	}
	r.push(r.curCount)
	r.curStart = start
	r.curCount = 0
	r.rateFired = false
}

// push adds a completed window's count to the bounded history. The ring
// grows with the windows it holds, up to histCap: most agents of a large
// fleet complete few windows or none, and a ring allocated whole for each
// (60 windows by default) was about 40 MB over 100,000 agents.
func (r *Rate) push(count int) {
	if len(r.history) < r.histCap {
		r.history = append(r.history, count)
		r.histLen++
		r.histSum += count
		r.histPos = len(r.history) % r.histCap
		return
	}
	r.histSum -= r.history[r.histPos] // overwrite the oldest
	r.history[r.histPos] = count
	r.histSum += count
	r.histPos = (r.histPos + 1) % r.histCap
}

func (r *Rate) mean() float64 {
	if r.histLen == 0 {
		return 0
	}
	return float64(r.histSum) / float64(r.histLen)
}

// rateJSON is Rate's encoding: the completed windows oldest first, the
// current window's start in Unix nanoseconds.
type rateJSON struct {
	Window   time.Duration `json:"window_ns"`
	History  []int         `json:"history,omitempty"` // oldest first
	HistCap  int           `json:"history_cap"`
	Started  bool          `json:"started,omitempty"`
	CurStart int64         `json:"current_start_ns,omitempty"`
	CurCount int           `json:"current_count,omitempty"`
	Fired    bool          `json:"fired,omitempty"`
}

// MarshalJSON encodes the rate state.
func (r Rate) MarshalJSON() ([]byte, error) {
	r.init()
	out := rateJSON{Window: r.window, HistCap: r.histCap, Started: r.started, CurCount: r.curCount, Fired: r.rateFired}
	if r.started {
		out.CurStart = r.curStart.UnixNano()
	}
	for i := range r.histLen {
		out.History = append(out.History, r.history[(r.histPos-r.histLen+i+len(r.history))%len(r.history)])
	}
	return json.Marshal(out)
}

// UnmarshalJSON decodes what MarshalJSON wrote.
func (r *Rate) UnmarshalJSON(data []byte) error {
	var in rateJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	if in.Window <= 0 || in.HistCap < BaselineMinHistory || len(in.History) > in.HistCap || in.CurCount < 0 {
		return fmt.Errorf("detect: rate state out of range (window %v, %d of %d windows, count %d)", in.Window, len(in.History), in.HistCap, in.CurCount)
	}
	*r = Rate{window: in.Window, histCap: in.HistCap, started: in.Started, curCount: in.CurCount, rateFired: in.Fired}
	if in.Started {
		r.curStart = time.Unix(0, in.CurStart).UTC()
	}
	for _, c := range in.History {
		r.push(c)
	}
	return nil
}
