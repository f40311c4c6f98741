package process

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"svc/testkit/gateway"
)

// writeTestCert writes a self-signed certificate for 127.0.0.1 and its key.
func writeTestCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "svc-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// With SVC_TLS_CERT and SVC_TLS_KEY the API port speaks TLS 1.2+ with
// HTTP/1.1 and HTTP/2, and plain HTTP on the same port is redirected (308).
func TestE2ETLS(t *testing.T) {
	cert, key := writeTestCert(t)
	s := gateway.StartProcess(t, "sqlite", map[string]string{"SVC_TLS_CERT": cert, "SVC_TLS_KEY": key})

	resp, body := s.Do(t, "GET", "/v2/version", "", nil)
	if resp.StatusCode != 200 || resp.TLS == nil || !strings.Contains(string(body), `"api_version":"v2"`) {
		t.Fatalf("https GET = %d tls=%v %s", resp.StatusCode, resp.TLS != nil, body)
	}
	if resp.ProtoMajor != 2 {
		t.Errorf("want HTTP/2 over TLS, got %s", resp.Proto)
	}

	plainURL := "http://" + strings.TrimPrefix(s.Base, "https://") + "/v2/version?x=1"
	noFollow := &http.Client{Timeout: 5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	pr, err := noFollow.Get(plainURL)
	if err != nil {
		t.Fatal(err)
	}
	_ = pr.Body.Close()
	if pr.StatusCode != http.StatusPermanentRedirect || pr.Header.Get("Location") != strings.Replace(plainURL, "http://", "https://", 1) {
		t.Fatalf("plain HTTP = %d Location %q", pr.StatusCode, pr.Header.Get("Location"))
	}

	// TLS 1.1 is refused.
	pool := x509.NewCertPool()
	raw, _ := os.ReadFile(cert)
	pool.AppendCertsFromPEM(raw)
	// An old client on purpose: the server must refuse it.
	oldTLS := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11} //nolint:gosec // G402: testing the refusal
	old := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: oldTLS}}
	if r, err := old.Get(s.Base + "/livez"); err == nil {
		_ = r.Body.Close()
		t.Fatal("a TLS 1.1 client was served")
	}
	if code, _ := s.Stop(t); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d", code)
	}
}
