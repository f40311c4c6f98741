package outbound

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// TestPoster checks the notifier's transport: headers and body
// arrive, a redirect is answered as its 3xx status (not followed), and a
// transport error does not carry the URL, whose path is a secret.
func TestPoster(t *testing.T) {
	var gotBody, gotSig string
	followed := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		case "/elsewhere":
			followed = true
		default:
			b := make([]byte, r.ContentLength)
			_, _ = r.Body.Read(b)
			gotBody, gotSig = string(b), r.Header.Get("X-Svc-Webhook-Signature")
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer srv.Close()
	ctx := context.Background()

	status, err := Poster(srv.URL+"/hooks/T1", true)(ctx, []byte(`{"text":"hi"}`), map[string]string{"X-Svc-Webhook-Signature": "sha256=ab"})
	if err != nil || status != http.StatusAccepted || gotBody != `{"text":"hi"}` || gotSig != "sha256=ab" {
		t.Fatalf("post: %d %v body %q sig %q", status, err, gotBody, gotSig)
	}
	status, err = Poster(srv.URL+"/moved", true)(ctx, []byte(`{}`), nil)
	if err != nil || status != http.StatusFound || followed {
		t.Fatalf("redirect: status %d err %v followed %v", status, err, followed)
	}
	secretPath := "/services/T000/B000/very-secret-token"
	_, err = Poster("http://127.0.0.1:1"+secretPath, true)(ctx, []byte(`{}`), nil)
	if err == nil || strings.Contains(err.Error(), "very-secret-token") {
		t.Fatalf("transport error %v must exist and not name the URL", err)
	}
}

// TestOutboundTargets checks CONTRACT §7's rule at dial time: loopback only
// when private targets are allowed, link-local and metadata addresses never.
func TestOutboundTargets(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer srv.Close()
	ctx := context.Background()
	if _, err := Poster(srv.URL, false)(ctx, []byte(`{}`), nil); !errors.Is(err, ErrForbiddenTarget) {
		t.Errorf("loopback without SVC_ALLOW_PRIVATE_TARGETS: %v, want ErrForbiddenTarget", err)
	}
	if status, err := Poster(srv.URL, true)(ctx, []byte(`{}`), nil); err != nil || status != http.StatusOK {
		t.Errorf("loopback with SVC_ALLOW_PRIVATE_TARGETS: %d %v", status, err)
	}
	for _, tc := range []struct {
		addr         string
		allowPrivate bool
		ok           bool
	}{
		{"169.254.169.254", true, false}, {"169.254.169.254", false, false}, {"fe80::1", true, false},
		{"0.0.0.0", true, false}, {"224.0.0.1", true, false}, {"::ffff:169.254.169.254", true, false},
		{"10.1.2.3", false, false}, {"10.1.2.3", true, true}, {"192.168.0.10", false, false}, {"172.16.5.4", false, false},
		{"100.64.1.1", false, false}, {"fd00::1", false, false}, {"127.0.0.1", false, false}, {"::1", true, true},
		{"93.184.216.34", false, true}, {"2606:4700::1111", false, true},
	} {
		err := CheckTarget(netip.MustParseAddr(tc.addr), tc.allowPrivate)
		if (err == nil) != tc.ok {
			t.Errorf("CheckTarget(%s, allowPrivate=%v) = %v, want allowed=%v", tc.addr, tc.allowPrivate, err, tc.ok)
		}
	}
}
