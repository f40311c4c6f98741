package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestWebhookPoster checks the notifier's transport: headers and body
// arrive, a redirect is answered as its 3xx status (not followed), and a
// transport error does not carry the URL, whose path is a secret.
func TestWebhookPoster(t *testing.T) {
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

	status, err := WebhookPoster(srv.URL+"/hooks/T1", nil)(ctx, []byte(`{"text":"hi"}`), map[string]string{"X-Svc-Webhook-Signature": "sha256=ab"})
	if err != nil || status != http.StatusAccepted || gotBody != `{"text":"hi"}` || gotSig != "sha256=ab" {
		t.Fatalf("post: %d %v body %q sig %q", status, err, gotBody, gotSig)
	}
	status, err = WebhookPoster(srv.URL+"/moved", nil)(ctx, []byte(`{}`), nil)
	if err != nil || status != http.StatusFound || followed {
		t.Fatalf("redirect: status %d err %v followed %v", status, err, followed)
	}
	secretPath := "/services/T000/B000/very-secret-token"
	_, err = WebhookPoster("http://127.0.0.1:1"+secretPath, nil)(ctx, []byte(`{}`), nil)
	if err == nil || strings.Contains(err.Error(), "very-secret-token") {
		t.Fatalf("transport error %v must exist and not name the URL", err)
	}
}
