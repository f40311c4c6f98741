package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"
)

// ErrUnknownTask: no supervised child has that name.
var ErrUnknownTask = errors.New("actors: unknown background task")

// ChildSpec declares one supervised background task.
type ChildSpec struct {
	Name     string
	Producer actor.Producer
	// MaxRestarts failures within Within are restarted; one more and the
	// child is stopped and marked dead.
	MaxRestarts int
	Within      time.Duration
	// Backoff, when set, delays each restart: Backoff, then doubling, capped
	// at MaxBackoff (default 30 s). For children doing flaky I/O.
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// injectFault makes the receiving supervised child panic: a chaos hook for
// SREs' drills and for tests, reachable only from the loopback debug
// listener.
type injectFault struct{ Reason string }

// NewSystem builds the actor system with its logging bridged into log,
// whose dead letters answer the requests that carry a reply channel
// (reply.go).
func NewSystem(log hclog.Logger) *actor.ActorSystem {
	handler := slogHandler(log)
	system := actor.NewActorSystemWithConfig(actor.Configure(actor.WithLoggerFactory(
		func(*actor.ActorSystem) *slog.Logger { return slog.New(handler) })))
	system.Extensions.Register(systemDispatcher{newReusingDispatcher(300, 10*time.Second)})
	answerDeadLetters(system)
	return system
}

// Supervisor is the root of the supervision tree.
type Supervisor struct {
	system   *actor.ActorSystem
	root     *actor.PID
	registry *Registry
	log      hclog.Logger

	strategy *budgetStrategy

	mu       sync.Mutex
	children map[string]*actor.PID
}

// StartSupervisor spawns the root supervisor and, under it, every child of
// specs, each registered as a background task in registry.
func StartSupervisor(system *actor.ActorSystem, registry *Registry, log hclog.Logger, specs []ChildSpec) (*Supervisor, error) {
	s := &Supervisor{system: system, registry: registry, log: log, children: map[string]*actor.PID{}}
	bySuffix := map[string]ChildSpec{}
	for _, sp := range specs {
		if sp.Name == "" || strings.Contains(sp.Name, "/") || sp.Producer == nil {
			return nil, fmt.Errorf("actors: invalid child spec %q", sp.Name)
		}
		if _, dup := bySuffix[sp.Name]; dup {
			return nil, fmt.Errorf("actors: duplicate child %q", sp.Name)
		}
		bySuffix[sp.Name] = sp
		registry.Register(sp.Name, true)
	}
	strategy := &budgetStrategy{specs: bySuffix, registry: registry, log: log, pending: map[string]*pendingRestart{}}
	s.strategy = strategy
	started := make(chan error, 1)
	props := actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); !ok {
			return
		}
		for _, sp := range specs {
			pid, err := ctx.SpawnNamed(actor.PropsFromProducer(sp.Producer, actor.WithDispatcher(dispatcherOf(ctx.ActorSystem())),
				actor.WithReceiverMiddleware(s.childMiddleware(sp.Name))), sp.Name)
			if err != nil {
				started <- fmt.Errorf("actors: spawn %s: %w", sp.Name, err)
				return
			}
			s.mu.Lock()
			s.children[sp.Name] = pid
			s.mu.Unlock()
		}
		started <- nil
	}, actor.WithSupervisor(strategy))
	pid, err := system.Root.SpawnNamed(props, "supervisor")
	if err != nil {
		return nil, fmt.Errorf("actors: spawn supervisor: %w", err)
	}
	s.root = pid
	if err := <-started; err != nil {
		return nil, err
	}
	return s, nil
}

// childMiddleware marks the child ok each time it (re)starts and turns an
// injectFault into a panic inside the child.
func (s *Supervisor) childMiddleware(name string) actor.ReceiverMiddleware {
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			switch m := env.Message.(type) {
			case *actor.Started:
				s.registry.Set(name, StateOK, "")
			case *injectFault:
				panic("injected fault: " + m.Reason)
			}
			next(c, env)
		}
	}
}

// Child returns the PID of a supervised child.
func (s *Supervisor) Child(name string) (*actor.PID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pid, ok := s.children[name]
	return pid, ok
}

// InjectFault makes the named child fail once.
func (s *Supervisor) InjectFault(name, reason string) error {
	pid, ok := s.Child(name)
	if !ok {
		return ErrUnknownTask
	}
	s.system.Root.Send(pid, &injectFault{Reason: reason})
	return nil
}

// Stop poisons every child (a poison pill is a user message, so each child
// first handles everything already in its mailbox, then flushes what it
// buffers on Stopping), waiting at most grace for them, then stops the root.
// A child waiting out a restart backoff is stopped at once instead (its
// mailbox is suspended until the restart, so a poison pill would wait for
// the backoff, up to MaxBackoff), and no child is restarted from here on.
func (s *Supervisor) Stop(grace time.Duration) error {
	s.strategy.shutDown()
	s.mu.Lock()
	type child struct {
		name string
		pid  *actor.PID
	}
	children := make([]child, 0, len(s.children))
	for name, pid := range s.children {
		children = append(children, child{name, pid})
	}
	s.mu.Unlock()
	done := make(chan string, len(children))
	for _, c := range children {
		f := s.system.Root.PoisonFuture(c.pid)
		go func() { _ = f.Wait(); done <- c.name }()
	}
	timeout := time.After(grace)
	stopped := map[string]bool{}
	var err error
	for range children {
		select {
		case name := <-done:
			stopped[name] = true
			continue
		case <-timeout:
		}
		var late []string
		for _, c := range children {
			if !stopped[c.name] {
				late = append(late, c.name)
			}
		}
		slices.Sort(late)
		err = fmt.Errorf("actors: background tasks did not stop within the grace period: %s", strings.Join(late, ", "))
		break
	}
	return errors.Join(err, s.system.Root.StopFuture(s.root).Wait())
}

// budgetStrategy restarts a failed child within its spec's budget, after
// its backoff, and stops it for good once the budget is spent.
type budgetStrategy struct {
	specs    map[string]ChildSpec
	registry *Registry
	log      hclog.Logger

	mu       sync.Mutex
	stopping bool
	pending  map[string]*pendingRestart // children waiting out a backoff, by name
}

// pendingRestart is a restart scheduled after a backoff.
type pendingRestart struct {
	timer *time.Timer
	sup   actor.Supervisor
	child *actor.PID
}

// shutDown turns every later failure into a stop and stops the children
// waiting out a backoff now.
func (b *budgetStrategy) shutDown() {
	b.mu.Lock()
	b.stopping = true
	pending := b.pending
	b.pending = map[string]*pendingRestart{}
	b.mu.Unlock()
	for _, p := range pending {
		if p.timer.Stop() {
			p.sup.StopChildren(p.child)
		} // else the timer fired: it finds stopping set and stops the child
	}
}

// restartAfter restarts child after delay unless the supervisor stops
// first.
func (b *budgetStrategy) restartAfter(name string, delay time.Duration, sup actor.Supervisor, child *actor.PID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.stopping:
		sup.StopChildren(child) // a system message: it does not wait
		return
	case delay == 0:
		sup.RestartChildren(child)
		return
	}
	p := &pendingRestart{sup: sup, child: child}
	p.timer = time.AfterFunc(delay, func() {
		b.mu.Lock()
		stopping := b.stopping
		if b.pending[name] == p {
			delete(b.pending, name)
		}
		b.mu.Unlock()
		if stopping {
			sup.StopChildren(child)
			return
		}
		sup.RestartChildren(child)
	})
	b.pending[name] = p
}

func (b *budgetStrategy) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, _ any) {
	name := child.Id[strings.LastIndex(child.Id, "/")+1:]
	spec, ok := b.specs[name]
	if !ok {
		sup.StopChildren(child)
		return
	}
	rs.Fail()
	failures := rs.NumberOfFailures(spec.Within)
	if failures > spec.MaxRestarts {
		b.log.Error("background task exhausted its restart budget; stopped", "task", name,
			"failures", failures, "within", spec.Within, "reason", fmt.Sprint(reason))
		b.registry.Set(name, StateDead, fmt.Sprintf("restart budget spent (%d failures within %s): %v", failures, spec.Within, reason))
		sup.StopChildren(child)
		return
	}
	b.registry.restarted(name)
	b.registry.Set(name, StateDegraded, fmt.Sprintf("restarting after failure: %v", reason))
	delay := time.Duration(0)
	if spec.Backoff > 0 {
		limit := spec.MaxBackoff
		if limit <= 0 {
			limit = 30 * time.Second
		}
		delay = spec.Backoff
		for i := 1; i < failures && delay < limit; i++ {
			delay *= 2
		}
		delay = min(delay, limit)
	}
	b.log.Warn("background task failed; restarting", "task", name, "failures", failures, "delay", delay, "reason", fmt.Sprint(reason))
	b.restartAfter(name, delay, sup, child)
}
