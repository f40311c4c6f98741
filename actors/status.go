package actors

import (
	"sort"
	"sync"
	"time"
)

// State is a component's health.
type State string

// Component states.
const (
	StateStarting State = "starting"
	StateOK       State = "ok"
	StateDegraded State = "degraded"
	StateDead     State = "dead"
)

// Component is the health of one background task or dependency.
type Component struct {
	Name     string    `json:"name"`
	State    State     `json:"state"`
	Detail   string    `json:"detail,omitempty"`
	Since    time.Time `json:"since"`
	Restarts int       `json:"restarts"`
	// Task is true for supervised background tasks (counted by /readyz's
	// background_tasks), false for dependencies such as the audit writer.
	Task bool `json:"task"`
}

// Registry is the component status registry that the health endpoints
// aggregate. It is safe for concurrent use.
type Registry struct {
	mu    sync.Mutex
	comps map[string]*Component
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{comps: map[string]*Component{}} }

// Register adds a component in the starting state.
func (r *Registry) Register(name string, task bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.comps[name]; !ok {
		r.comps[name] = &Component{Name: name, State: StateStarting, Since: time.Now().UTC(), Task: task}
	}
}

// Set records a component's state; a dead component stays dead.
func (r *Registry) Set(name string, s State, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.comps[name]
	if !ok {
		c = &Component{Name: name}
		r.comps[name] = c
	}
	if c.State == StateDead {
		return
	}
	if c.State != s {
		c.Since = time.Now().UTC()
	}
	c.State, c.Detail = s, detail
}

func (r *Registry) restarted(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.comps[name]; ok {
		c.Restarts++
	}
}

// Get returns one component.
func (r *Registry) Get(name string) (Component, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.comps[name]
	if !ok {
		return Component{}, false
	}
	return *c, true
}

// Snapshot returns every component, sorted by name.
func (r *Registry) Snapshot() []Component {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Component, 0, len(r.comps))
	for _, c := range r.comps {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DeadTasks lists the background tasks whose restart budget is spent.
func (r *Registry) DeadTasks() []string {
	out := []string{}
	for _, c := range r.Snapshot() {
		if c.Task && c.State == StateDead {
			out = append(out, c.Name)
		}
	}
	return out
}
