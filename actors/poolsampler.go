package actors

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/persistence"
)

// PoolSample holds the rolling mean of the synthetic acquire wait (SPEC
// 4.10 db_pool_acquire_wait_seconds). Safe for concurrent use.
type PoolSample struct {
	bits atomic.Uint64 // float64 seconds
	n    atomic.Uint64
}

// MeanWaitSeconds is the rolling mean of the sampled acquire waits.
func (p *PoolSample) MeanWaitSeconds() float64 { return math.Float64frombits(p.bits.Load()) }

// Samples counts the acquires sampled (one per
// SVC_POOL_HEALTH_SAMPLE_INTERVAL_SECS).
func (p *PoolSample) Samples() uint64 { return p.n.Load() }

func (p *PoolSample) add(d time.Duration) {
	n := p.n.Add(1)
	w := float64(min(n, 10)) // rolling: the last ~10 samples dominate
	old := p.MeanWaitSeconds()
	p.bits.Store(math.Float64bits(old + (d.Seconds()-old)/w))
}

// poolSampler acquires one connection every interval, records the wait and
// warns when the pool is more than 80 percent busy.
type poolSampler struct {
	store    persistence.Store
	every    time.Duration
	sample   *PoolSample
	log      hclog.Logger
	ticker   *ticker
	inFlight bool
}

type sampled struct {
	wait time.Duration
	err  error
}

// NewPoolSampler returns the producer of the sampler actor.
func NewPoolSampler(store persistence.Store, every time.Duration, sample *PoolSample, log hclog.Logger) actor.Producer {
	return func() actor.Actor { return &poolSampler{store: store, every: every, sample: sample, log: log} }
}

// Receive implements actor.Actor.
func (p *poolSampler) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.ticker = startTicker(ctx, p.every)
	case tick:
		if p.inFlight {
			return
		}
		p.inFlight = true
		self, root := ctx.Self(), ctx.ActorSystem().Root
		go func() {
			c, cancel := ioContext(p.every)
			defer cancel()
			d, err := p.store.SampleAcquire(c)
			root.Send(self, sampled{d, err})
		}()
	case sampled:
		p.inFlight = false
		if m.err != nil {
			p.log.Warn("pool sample failed", "error", m.err)
			return
		}
		p.sample.add(m.wait)
		if st := p.store.PoolStats(); st.Max > 0 && float64(st.Active)/float64(st.Max) > 0.8 {
			p.log.Warn("database pool more than 80 percent busy", "active", st.Active, "max", st.Max, "wait", m.wait)
		}
	case *actor.Stopping, *actor.Restarting:
		p.ticker.Stop()
	}
}
