package postgres_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"svc/persistence"
	"svc/persistence/postgres"
	"svc/persistence/storetest"
)

// BenchmarkCommitDecisionsPostgres commits N decisions (each with its audit
// row and receipt) in one group commit on the Postgres that make test or
// make bench provisions: receipts sealed on arrival (a lone node: one
// round trip, the head advanced at COMMIT) or sealed in the transaction (a
// cluster: the head locked first and read, a round trip of its own).
// ns/decision is the cost per decision as the writer sees it (the server's
// work and the round trips). Each runs on a fresh database.
func BenchmarkCommitDecisionsPostgres(b *testing.B) {
	for _, sealed := range []bool{true, false} {
		for _, n := range []int{1, 32} {
			b.Run(fmt.Sprintf("sealed=%v/batch=%d", sealed, n), func(b *testing.B) {
				benchCommit(b, storetest.PostgresURL(b), n, sealed)
			})
		}
	}
}

func benchCommit(b *testing.B, url string, n int, sealed bool) {
	ctx := context.Background()
	s, err := postgres.Open(ctx, postgres.Options{URL: url, PoolSize: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	now := time.Now().UTC()
	tn := persistence.Tenant{ID: uuid.NewString(), Name: "bench-" + uuid.NewString(), CreatedAt: now}
	if err := s.CreateTenant(ctx, tn, persistence.OperatorToken{ID: uuid.NewString(), TenantID: tn.ID, Name: "a",
		Role: "admin", CreatedAt: now}, []byte(uuid.NewString())); err != nil {
		b.Fatal(err)
	}
	var head persistence.ChainHead
	seal := func(_ string, h persistence.ChainHead, rs []*persistence.Receipt) error {
		for _, r := range rs {
			if r.Hash != "" && r.Seq == h.Seq+1 && r.PrevHash == h.Hash {
				h = persistence.ChainHead{Seq: r.Seq, Hash: r.Hash}
				continue
			}
			sum := sha256.Sum256([]byte(h.Hash + r.ID))
			h.Seq++
			r.Seq, r.PrevHash, r.Hash = h.Seq, h.Hash, hex.EncodeToString(sum[:])
			h.Hash = r.Hash
		}
		return nil
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		writes := make([]persistence.DecisionWrite, n)
		rs := make([]*persistence.Receipt, n)
		for j := range writes {
			writes[j] = benchWrite(tn.ID, now)
			rs[j] = writes[j].Receipt
		}
		if sealed {
			_ = seal(tn.ID, head, rs)
			head = persistence.ChainHead{Seq: rs[n-1].Seq, Hash: rs[n-1].Hash}
		}
		b.StartTimer()
		if err := s.CommitDecisions(ctx, writes, seal); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/decision")
	if adv, moved := s.HeadAdvances(); sealed && (adv == 0 || moved != 0) {
		b.Fatalf("sealed runs: %d advanced at COMMIT, %d rewritten", adv, moved)
	}
}

func benchWrite(tenantID string, now time.Time) persistence.DecisionWrite {
	id := uuid.NewString()
	run := "run-" + id[:8]
	d := persistence.Decision{ID: id, TenantID: tenantID, AgentID: "agent", Tool: "github", Action: "create_issue",
		ActionHash: "ab", Decision: "allow", Reason: "default_allow_read", RiskScore: 10, CompositeRiskScore: 20,
		MatchedPolicyIDs: []string{"default_allow_read"}, RedactedFields: []string{}, TrustLevel: "unknown",
		RootTrustLevel: "unknown", RunID: &run, ToolCall: json.RawMessage(`{"tool":"github","action":"create_issue"}`), CreatedAt: now,
		AuditID: uuid.NewString()}
	r := &persistence.Receipt{ID: uuid.NewString(), TenantID: tenantID, DecisionID: id, ActionHash: "ab", Decision: "allow", CreatedAt: now}
	return persistence.DecisionWrite{Decision: d, Receipt: r}
}
