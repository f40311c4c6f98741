package mcpproxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func sealer(t *testing.T, secret string) *Sealer {
	t.Helper()
	k, err := DeriveKey([]byte(secret), "mcp proxy sessions")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSealer(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSessionsOpenOnlyWhereSealed(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	a, b := sealer(t, "installation one"), sealer(t, "installation two")
	sess := Session{ID: "s1", TenantID: "t", AgentID: "a", ServerKey: "k", UpstreamID: "up", Version: "2025-11-25", Expires: now.Add(time.Hour).Unix()}
	id, err := a.Seal(sess)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(id, "up") && strings.Contains(id, "s1") {
		t.Fatalf("the sealed id shows its contents: %s", id)
	}
	got, err := a.Open(id, now)
	if err != nil || got != sess {
		t.Fatalf("open on the sealing key: %+v %v", got, err)
	}
	// Two ids of one session differ (a fresh nonce each time).
	if id2, _ := a.Seal(sess); id2 == id {
		t.Fatal("two seals of one session gave one id")
	}
	if _, err := b.Open(id, now); !errors.Is(err, ErrSession) {
		t.Fatalf("another installation's key opened the id: %v", err)
	}
	if _, err := a.Open(id, now.Add(time.Hour)); !errors.Is(err, ErrSession) {
		t.Fatalf("an expired id opened: %v", err)
	}
	raw := []byte(id)
	raw[len(raw)/2] ^= 1
	for _, bad := range []string{"", "x", string(raw), id + "A", "!!!!"} {
		if _, err := a.Open(bad, now); !errors.Is(err, ErrSession) {
			t.Errorf("Open(%q) = %v, want ErrSession", bad, err)
		}
	}
	// Credentials are bound to their tenant and server, and never open as
	// a session.
	blob, err := a.SealCredentials("t", "k", map[string]string{"Authorization": "Bearer x"})
	if err != nil {
		t.Fatal(err)
	}
	if h, err := a.OpenCredentials("t", "k", blob); err != nil || h["Authorization"] != "Bearer x" {
		t.Fatalf("credentials: %v %v", h, err)
	}
	if _, err := a.OpenCredentials("t", "other", blob); err == nil {
		t.Fatal("credentials opened for another server")
	}
	if _, err := a.Open(string(blob), now); !errors.Is(err, ErrSession) {
		t.Fatalf("credentials opened as a session: %v", err)
	}
}

func TestReadEventBounds(t *testing.T) {
	in := "id: 7\nevent: message\ndata: {\"a\":\ndata: 1}\n\n: comment\n\n" + "data: " + strings.Repeat("x", 100) + "\n\n"
	br := bufio.NewReader(strings.NewReader(in))
	ev := readEvent(br, 64)
	if ev.err != nil || ev.name != "message" || string(ev.data) != "{\"a\":\n1}" || len(ev.lines) != 2 {
		t.Fatalf("first event: %+v %q", ev, ev.data)
	}
	var out bytes.Buffer
	if err := writeEvent(&out, ev, ev.data); err != nil || !strings.Contains(out.String(), "id: 7\n") {
		t.Fatalf("written: %q %v", out.String(), err)
	}
	if ev := readEvent(br, 64); ev.err != nil || ev.data != nil || len(ev.lines) != 1 {
		t.Fatalf("comment: %+v", ev)
	}
	if ev := readEvent(br, 64); !errors.Is(ev.err, errTooLarge) {
		t.Fatalf("a 106-byte line with a 64-byte bound: %+v", ev)
	}
}

func TestFilterToolsKeepsWhatIsAllowedAsSent(t *testing.T) {
	res := json.RawMessage(`{"tools":[{"name":"a","inputSchema":{"type":"object"},"x-extra":1},{"name":"b","annotations":{"readOnlyHint":true}}],"nextCursor":"c"}`)
	var seen []Tool
	out, drifted, err := filterTools(res, func(t Tool) (bool, bool) {
		seen = append(seen, t)
		return t.Name == "a", t.Name == "b"
	})
	if err != nil || !drifted {
		t.Fatalf("filter: %v drifted %v", err, drifted)
	}
	if string(out) != `{"nextCursor":"c","tools":[{"name":"a","inputSchema":{"type":"object"},"x-extra":1}]}` {
		t.Fatalf("filtered: %s", out)
	}
	if len(seen) != 2 || seen[0].ReadOnly || !seen[1].ReadOnly {
		t.Fatalf("tools seen: %+v", seen)
	}
	if _, _, err := filterTools(json.RawMessage(`{"tools":{}}`), func(Tool) (bool, bool) { return true, false }); err == nil {
		t.Fatal("tools that are not an array were accepted")
	}
}
