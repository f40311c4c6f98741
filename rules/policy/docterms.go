package policy

import (
	"hash/maphash"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// docTerms memoizes the run documents of the policy input as terms, keyed
// by their canonical bytes ([Input.RunKey]). Calls that see the same run
// context (what the loaded policies read of it: for most, a few counts and
// the trust) share one term instead of building its objects again, about
// 30 allocations and 1.5 KB for README's five run policies. A term is never
// changed once built, and the evaluator only reads its input (as the
// compiled modules' terms are shared by concurrent queries), so a shared
// term is safe. Documents that hold times (age_s, idle_s, since_s, ago_s)
// seldom repeat; a miss costs a lookup and an insert.
type docTerms struct {
	seed   maphash.Seed
	shards [docTermShards]docTermShard
}

type docTermShard struct {
	mu sync.Mutex
	m  map[string]docTerm
}

// docTerm is the terms of input.run and input.agent_history (nil when the
// input has none).
type docTerm struct{ run, agentHistory *ast.Term }

// At most docTermShards * docTermsPerShard documents are kept (about 6 MB
// for documents of README's size); a full shard drops an arbitrary one.
const (
	docTermShards    = 16
	docTermsPerShard = 256
)

func newDocTerms() *docTerms {
	c := &docTerms{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].m = make(map[string]docTerm)
	}
	return c
}

// get returns the terms of the documents whose canonical bytes are key,
// built by build on a miss.
func (c *docTerms) get(key []byte, build func() docTerm) docTerm {
	sh := &c.shards[maphash.Bytes(c.seed, key)%docTermShards]
	sh.mu.Lock()
	t, ok := sh.m[string(key)]
	sh.mu.Unlock()
	if ok {
		return t
	}
	t = build()
	sh.mu.Lock()
	if len(sh.m) >= docTermsPerShard {
		for k := range sh.m {
			delete(sh.m, k)
			break
		}
	}
	sh.m[string(key)] = t
	sh.mu.Unlock()
	return t
}
