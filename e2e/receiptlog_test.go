package e2e

import (
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"svc/testkit"
	"svc/testkit/gateway"
)

// logCheckpoint is a checkpoint as an auditor reads it: its note opened
// with the served verifier key, its body parsed by hand.
type logCheckpoint struct {
	size int64
	root tlog.Hash
}

// waitCheckpoint polls the tenant's checkpoint until it covers at least
// size receipts (the leader publishes every half interval).
func waitCheckpoint(t *testing.T, s *gateway.Server, tok, vkey, origin string, size int64) logCheckpoint {
	t.Helper()
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatalf("verifier key %q: %v", vkey, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		resp, body := s.Do(t, "GET", "/v2/receipts/checkpoint", tok, nil)
		code := resp.StatusCode
		last = string(body)
		if code == 200 {
			n, err := note.Open(body, note.VerifierList(v))
			if err != nil {
				t.Fatalf("the checkpoint does not verify with the served key: %v\n%s", err, body)
			}
			lines := strings.Split(n.Text, "\n")
			if len(lines) < 4 || lines[0] != origin {
				t.Fatalf("checkpoint body %q, want origin %q", n.Text, origin)
			}
			var cp logCheckpoint
			if cp.size, err = strconv.ParseInt(lines[1], 10, 64); err != nil {
				t.Fatalf("checkpoint size %q", lines[1])
			}
			root, err := base64.StdEncoding.DecodeString(lines[2])
			if err != nil || len(root) != 32 {
				t.Fatalf("checkpoint root %q", lines[2])
			}
			copy(cp.root[:], root)
			if cp.size >= size {
				return cp
			}
		} else if code != 404 {
			t.Fatalf("GET checkpoint: %d %s", code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no checkpoint of at least %d receipts within 30 s; last answer %s", size, last)
	return logCheckpoint{}
}

func hashes64(t *testing.T, list []any) []tlog.Hash {
	t.Helper()
	out := make([]tlog.Hash, len(list))
	for i, x := range list {
		b, err := base64.StdEncoding.DecodeString(x.(string))
		if err != nil || len(b) != 32 {
			t.Fatalf("proof hash %v", x)
		}
		copy(out[i][:], b)
	}
	return out
}

// TestE2EReceiptLog: a tenant's receipts are the leaves of a tree whose
// signed checkpoints, inclusion proofs and consistency proofs verify with
// golang.org/x/mod's own checkers (CONTRACT §17), on a lone node of each
// backend and on two nodes behind the balancer.
func TestE2EReceiptLog(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		_, seed := gateway.AzSeed(t)
		s := gateway.Start(t, backend, map[string]string{"SVC_RECEIPT_SIGNING_KEY": seed, "SVC_CHECKPOINT_INTERVAL_SECS": "1",
			"SVC_LOG_ORIGIN": "gateway.test/receipts"})
		tenantID, admin := s.Tenant(t, "log-"+testkit.Uniq())
		_, tok := s.Agent(t, admin, "logger", nil)
		s.Want(t, 404, "GET", "/v2/receipts/checkpoint", admin, nil)
		vkey := strings.TrimSpace(string(s.Want(t, 200, "GET", "/v2/receipts/checkpoint/key", tok, nil)))
		origin := "gateway.test/receipts/" + tenantID
		if !strings.HasPrefix(vkey, origin+"+") {
			t.Fatalf("verifier key %q is not named %s", vkey, origin)
		}

		var ids []string
		decideN := func(n int) {
			for range n {
				ids = append(ids, testkit.Str(t, gateway.AzDecide(t, s, tok, gateway.AzRead(nil), "allow", ""), "receipt_id"))
			}
		}
		decideN(5)
		first := waitCheckpoint(t, s, admin, vkey, origin, 5)
		for _, id := range ids {
			r := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/receipts/"+id, admin, nil))
			raw, err := hex.DecodeString(testkit.Str(t, r, "receipt_hash"))
			if err != nil {
				t.Fatal(err)
			}
			// The agent reads the proof of its own receipt, as an operator does.
			for _, who := range []string{admin, tok} {
				p := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/receipts/"+id+"/inclusion?tree_size="+itoa(first.size), who, nil))
				leaf := int64(p["leaf_index"].(float64))
				if int64(p["tree_size"].(float64)) != first.size || leaf != int64(r["seq"].(float64))-1 {
					t.Fatalf("inclusion of %s: %v", id, p)
				}
				if err := tlog.CheckRecord(hashes64(t, p["hashes"].([]any)), first.size, first.root, leaf, tlog.RecordHash(raw)); err != nil {
					t.Fatalf("the inclusion proof of receipt %s does not verify: %v", id, err)
				}
			}
		}
		// Without tree_size: the latest checkpoint's tree.
		p := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/receipts/"+ids[0]+"/inclusion", admin, nil))
		if int64(p["tree_size"].(float64)) < first.size {
			t.Fatalf("inclusion against the latest checkpoint: %v", p)
		}

		decideN(4)
		second := waitCheckpoint(t, s, admin, vkey, origin, first.size+4)
		c := testkit.Obj(t, s.Want(t, 200, "GET", "/v2/receipts/consistency?from="+itoa(first.size)+"&to="+itoa(second.size), tok, nil))
		if err := tlog.CheckTree(hashes64(t, c["hashes"].([]any)), second.size, second.root, first.size, first.root); err != nil {
			t.Fatalf("the checkpoints of %d and %d are not proven consistent: %v", first.size, second.size, err)
		}

		// Sizes beyond the tree, malformed ones, and other tenants' receipts.
		s.Want(t, 400, "GET", "/v2/receipts/"+ids[0]+"/inclusion?tree_size="+itoa(second.size+1000), admin, nil)
		s.Want(t, 400, "GET", "/v2/receipts/"+ids[len(ids)-1]+"/inclusion?tree_size=1", admin, nil)
		s.Want(t, 400, "GET", "/v2/receipts/"+ids[0]+"/inclusion?tree_size=abc", admin, nil)
		s.Want(t, 400, "GET", "/v2/receipts/consistency?from=3&to=2", admin, nil)
		s.Want(t, 400, "GET", "/v2/receipts/consistency?from=1&to="+itoa(second.size+1000), admin, nil)
		s.Want(t, 400, "GET", "/v2/receipts/consistency?from=1", admin, nil)
		_, other := s.Tenant(t, "log-other-"+testkit.Uniq())
		s.Want(t, 404, "GET", "/v2/receipts/"+ids[0]+"/inclusion", other, nil)
		_, otherAgent := s.Agent(t, admin, "other-agent", nil)
		s.Want(t, 404, "GET", "/v2/receipts/"+ids[0]+"/inclusion", otherAgent, nil)
	})
	t.Run("unsigned", func(t *testing.T) {
		s := gateway.Start(t, "sqlite", nil)
		_, admin := s.Tenant(t, "log-unsigned-"+testkit.Uniq())
		s.Want(t, 404, "GET", "/v2/receipts/checkpoint", admin, nil)
		s.Want(t, 404, "GET", "/v2/receipts/checkpoint/key", admin, nil)
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
