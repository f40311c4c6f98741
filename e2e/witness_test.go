package e2e

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"svc/receiptlog"
	"svc/receiptlog/witnesstest"
	"svc/testkit"
	"svc/testkit/gateway"
)

// witnessOf returns the tenant's witness of id as GET /receipts/witnesses
// shows it.
func witnessOf(t *testing.T, s *gateway.Server, tok, id string) map[string]any {
	t.Helper()
	for _, w := range testkit.Arr(t, s.Want(t, 200, "GET", "/v2/receipts/witnesses", tok, nil)) {
		if w["witness_id"] == id {
			return w
		}
	}
	t.Fatalf("no witness %s", id)
	return nil
}

// TestE2EReceiptLogWitnesses: a tenant has its checkpoints cosigned by a
// real C2SP witness (litewitness): the checkpoint served carries the
// witness's cosignature, verifiable with its key; a witness whose view of
// the log differs refuses the next checkpoint, which raises a HIGH alert;
// on a lone node of each backend and on two nodes behind the balancer.
func TestE2EReceiptLogWitnesses(t *testing.T) {
	t.Parallel()
	gateway.ForModes(t, func(t *testing.T, backend string) {
		_, seed := gateway.AzSeed(t)
		s := gateway.Start(t, backend, map[string]string{"SVC_RECEIPT_SIGNING_KEY": seed, "SVC_CHECKPOINT_INTERVAL_SECS": "1",
			"SVC_LOG_ORIGIN": "gateway.test/receipts", "SVC_ALLOW_PRIVATE_TARGETS": "true"})
		tenantID, admin := s.Tenant(t, "witnessed-"+testkit.Uniq())
		_, tok := s.Agent(t, admin, "witnessed", nil)
		_, viewer := s.OpToken(t, admin, "auditor", "viewer")
		vkey := strings.TrimSpace(string(s.Want(t, 200, "GET", "/v2/receipts/checkpoint/key", admin, nil)))
		origin := "gateway.test/receipts/" + tenantID
		w := witnesstest.Start(t, "witness.test/"+backend)
		w.Follow(t, origin, vkey)

		// Bad settings: each a clear 400, a viewer 403, nothing stored.
		for _, body := range []map[string]any{{"url": w.URL}, {"key": w.Key}, {"url": w.URL, "key": "not a key"},
			{"url": "ftp://witness.test", "key": w.Key}, {"url": w.URL, "key": 7}} {
			s.Want(t, 400, "POST", "/v2/receipts/witnesses", admin, body)
		}
		s.Want(t, 403, "POST", "/v2/receipts/witnesses", viewer, map[string]any{"url": w.URL, "key": w.Key})
		if n := len(testkit.Arr(t, s.Want(t, 200, "GET", "/v2/receipts/witnesses", viewer, nil))); n != 0 {
			t.Fatalf("%d witnesses after refused settings", n)
		}

		created := testkit.Obj(t, s.Want(t, 201, "POST", "/v2/receipts/witnesses", admin, map[string]any{"url": w.URL, "key": w.Key}))
		id := testkit.Str(t, created, "witness_id")
		if created["status"] != "pending" || created["name"] != w.Name || created["tenant_id"] != tenantID {
			t.Fatalf("created witness %v", created)
		}
		s.Want(t, 409, "POST", "/v2/receipts/witnesses", admin, map[string]any{"url": w.URL, "key": w.Key})
		_, other := s.Tenant(t, "witnessed-other-"+testkit.Uniq())
		s.Want(t, 404, "DELETE", "/v2/receipts/witnesses/"+id, other, nil)

		for range 3 {
			gateway.AzDecide(t, s, tok, gateway.AzRead(nil), "allow", "")
		}
		wv, err := receiptlog.WitnessVerifier(w.Key)
		if err != nil {
			t.Fatal(err)
		}
		lv, err := note.NewVerifier(vkey)
		if err != nil {
			t.Fatal(err)
		}
		// The checkpoint served gets the witness's cosignature beside the
		// log's signature.
		var served string
		testkit.Eventually(t, 30*time.Second, "a checkpoint of 3 cosigned by the witness", func() bool {
			resp, body := s.Do(t, "GET", "/v2/receipts/checkpoint", tok, nil)
			served = string(body)
			if resp.StatusCode != 200 {
				return false
			}
			n, err := note.Open(body, note.VerifierList(lv, wv))
			return err == nil && len(n.Sigs) == 2 && strings.HasPrefix(n.Text, origin+"\n3\n")
		})
		if got := witnessOf(t, s, viewer, id); got["status"] != "ok" || got["tree_size"] != float64(3) || got["checked_at"] == nil {
			t.Fatalf("the witness after cosigning: %v", got)
		}
		if n := w.Size(t, origin); n != 3 {
			t.Fatalf("the witness records a checkpoint of %d, want 3:\n%s", n, served)
		}

		// The witness's view forks from the log's: the next checkpoint is
		// refused, the witness shows it, and a HIGH alert is raised.
		w.Fork(t, origin)
		gateway.AzDecide(t, s, tok, gateway.AzRead(nil), "allow", "")
		testkit.Eventually(t, 30*time.Second, "the witness refusing", func() bool {
			return witnessOf(t, s, admin, id)["status"] == "refused"
		})
		if got := witnessOf(t, s, admin, id); !strings.Contains(got["error"].(string), "does not verify") {
			t.Fatalf("the refused witness: %v", got)
		}
		testkit.Eventually(t, 30*time.Second, "a receipt_log_refused alert", func() bool {
			for _, a := range socAlerts(t, s, admin, "") {
				if a["rule_key"] == "receipt_log_refused" && a["severity"] == "HIGH" && strings.Contains(a["summary"].(string), w.Name) {
					return true
				}
			}
			return false
		})

		s.Want(t, 204, "DELETE", "/v2/receipts/witnesses/"+id, admin, nil)
		s.Want(t, 404, "DELETE", "/v2/receipts/witnesses/"+id, admin, nil)
		if n := len(testkit.Arr(t, s.Want(t, 200, "GET", "/v2/receipts/witnesses", admin, nil))); n != 0 {
			t.Fatalf("%d witnesses after the delete", n)
		}
	})
}
