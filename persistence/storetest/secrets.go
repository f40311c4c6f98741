package storetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"svc/persistence"
)

// testInstallationSecrets: the first value stored under a name is the one
// every later call gets, whatever it offers; of concurrent first calls one
// value wins for all; names are independent; deleting a tenant leaves the
// installation's secrets.
func testInstallationSecrets(t *testing.T, s persistence.Store) {
	first := []byte{0x00, 0x01, 0xfe, 0xff, 'k', 'e', 'y', 0x00}
	got, err := s.InstallationSecret(ctx(t), "mcp_proxy_sessions", first)
	if err != nil || !bytes.Equal(got, first) {
		t.Fatalf("first call = %x, %v; want %x", got, err, first)
	}
	got, err = s.InstallationSecret(ctx(t), "mcp_proxy_sessions", []byte("another value"))
	if err != nil || !bytes.Equal(got, first) {
		t.Fatalf("second call = %x, %v; want the first value %x", got, err, first)
	}
	other, err := s.InstallationSecret(ctx(t), "upstream_auth_seal", []byte("other name"))
	if err != nil || string(other) != "other name" {
		t.Fatalf("another name = %q, %v", other, err)
	}

	// Concurrent first calls all get one of the values offered, the same.
	const n = 8
	results := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.InstallationSecret(ctx(t), "raced", []byte(fmt.Sprintf("fresh-%d", i)))
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("concurrent call %d: %v", i, errs[i])
		}
		if !bytes.Equal(results[i], results[0]) {
			t.Fatalf("concurrent calls disagree: %q and %q", results[0], results[i])
		}
	}
	offered := false
	for i := range n {
		offered = offered || string(results[0]) == fmt.Sprintf("fresh-%d", i)
	}
	if !offered {
		t.Fatalf("the concurrent calls agreed on %q, which none offered", results[0])
	}
	if again, err := s.InstallationSecret(ctx(t), "raced", []byte("late")); err != nil || !bytes.Equal(again, results[0]) {
		t.Fatalf("after the race = %q, %v; want %q", again, err, results[0])
	}

	// No tenant owns them.
	tn, _ := mustTenant(t, s, "a")
	if err := s.DeleteTenant(ctx(t), tn.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.InstallationSecret(ctx(t), "mcp_proxy_sessions", []byte("after the tenant")); err != nil || !bytes.Equal(got, first) {
		t.Fatalf("after a tenant's deletion = %x, %v; want %x", got, err, first)
	}
}
