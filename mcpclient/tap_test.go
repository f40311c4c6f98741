package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"svc/mcpclient/mcptest"
)

// stripStream reads an event stream through the tap as the SDK would and
// returns what the SDK reads and what the tap kept.
func stripStream(t *testing.T, stream string, maxTools int) (string, *listTap, error) {
	t.Helper()
	tap := &listTap{max: maxTools}
	body := &sseStrip{src: bufio.NewReaderSize(strings.NewReader(stream), 64<<10), body: io.NopCloser(nil), tap: tap}
	out, err := io.ReadAll(body)
	return string(out), tap, err
}

// The SDK reads every event as the server sent it, but the data of the
// tools/list answer without its tools, which the tap kept: comments,
// priming events (an id, empty data), events the SDK ignores (their data
// dropped), messages over several data lines with CRLF line ends, fields
// after the data, a data line longer than the reader's buffer.
func TestTapEventStream(t *testing.T) {
	long := strings.Repeat("é", 100<<10) // 200 KiB: three buffers' worth
	stream := ": a comment\n\n" +
		"id: 0\ndata:\n\n" +
		"event: ping\ndata: {\"big\": \"" + strings.Repeat("x", 200<<10) + "\"}\n\n" +
		"id: 1\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata:  \"method\":\"notifications/message\",\"params\":{\"level\":\"info\"}}\r\n\r\n" +
		`data: {"jsonrpc":"2.0","id":2,"result":{"nextCursor":"c2","tools":[{"name":"a","description":"` + long +
		`","inputSchema":{"type":"object","properties":{}}},` + "\n" + `data: {"name":"b","annotations":{"readOnlyHint":true}}],"_meta":{"k":1}}}` +
		"\nid: 2\n\n"
	out, tap, err := stripStream(t, stream, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := ": a comment\n\n" +
		"id: 0\n\n" +
		"event: ping\n\n" +
		"id: 1\n" + `data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}` + "\n\n" +
		"id: 2\n" + `data: {"jsonrpc":"2.0","id":2,"result":{"nextCursor":"c2","tools":[],"_meta":{"k":1}}}` + "\n\n"
	if out != want {
		t.Errorf("the SDK reads\n%q\nwant\n%q", out, want)
	}
	tools := tap.listed()
	if len(tools) != 2 || tools[0].Name != "a" || tools[0].Description != long || string(tools[0].InputSchema) != `{"type":"object","properties":{}}` ||
		tools[1].Name != "b" || tools[1].InputSchema != nil {
		t.Errorf("tools: %d %+v", len(tools), tools[1])
	}
}

// What is not a JSON-RPC answer, or lists too much, is refused as it is
// read.
func TestTapRefuses(t *testing.T) {
	for _, c := range []struct {
		name, stream string
		want         error
	}{
		{"a line without a colon", "id: 1\nnonsense\n\n", ErrProtocol},
		{"data that is not JSON", "data: {\"jsonrpc\":\n\n", ErrProtocol},
		{"two values", "data: {\"id\":1} {\"id\":2}\n\n", ErrProtocol},
		{"tools not an array", `data: {"id":1,"result":{"tools":{"name":"a"}}}` + "\n\n", ErrProtocol},
		{"a tool that is not an object", `data: {"id":1,"result":{"tools":["a"]}}` + "\n\n", ErrProtocol},
		{"too many tools", `data: {"id":1,"result":{"tools":[{"name":"a"},{"name":"b"},{"name":"c"}]}}` + "\n\n", ErrTooLarge},
		{"a field line past its cap", "id: " + strings.Repeat("1", maxFieldLine) + "\n\n", ErrProtocol},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, tap, err := stripStream(t, c.stream, 2)
			if !errors.Is(err, c.want) || !errors.Is(tap.why(), c.want) {
				t.Errorf("err %v (recorded %v), want %v", err, tap.why(), c.want)
			}
		})
	}
	// A JSON body goes through the same reading.
	tap := &listTap{max: 1}
	if err := tap.strip(strings.NewReader(`{"id":1,"result":{"tools":[{"name":"a"},{"name":"b"}]}}`), new(bytes.Buffer)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a JSON body with too many tools: %v", err)
	}
}

// The list is read once: reading a 6.4 MB answer (400 tools of 16 KiB)
// allocates little more than the tools it keeps (the SDK allocated about
// 15 times the answer).
func TestTapReadsTheListOnce(t *testing.T) {
	var b strings.Builder
	b.WriteString(`data: {"jsonrpc":"2.0","id":2,"result":{"tools":[`)
	for i := range 400 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"tool_%03d","description":"%s","inputSchema":{"type":"object"}}`, i, strings.Repeat("Reads the ledger. ", 16<<10/18))
	}
	b.WriteString("]}}\n\n")
	stream := b.String()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, tap, err := stripStream(t, stream, 1000)
	runtime.ReadMemStats(&after)
	if err != nil || len(tap.listed()) != 400 {
		t.Fatalf("%v, %d tools", err, len(tap.listed()))
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > uint64(len(stream))*3/2 {
		t.Errorf("reading a %d-byte answer allocated %d bytes (%.1f times)", len(stream), got, float64(got)/float64(len(stream)))
	} else {
		t.Logf("reading a %d-byte answer allocated %d bytes (%.2f times)", len(stream), got, float64(got)/float64(len(stream)))
	}
}

// Both kinds of answer a server may give, event streams and JSON bodies,
// through every page; a tool name with U+0000 is listed as sent (the
// manifest's rules refuse it, naming it).
func TestToolsEitherAnswer(t *testing.T) {
	tools := []mcptest.Tool{{Name: "a", Description: "first"}, {Name: "get\x00weather", Description: "nul"}, {Name: "c"}}
	for _, c := range []struct {
		name string
		srv  *mcptest.Server
	}{{"event stream", mcptest.Start(t, 2, tools...)}, {"json", mcptest.StartJSON(t, 2, tools...)}} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Tools(context.Background(), http.DefaultClient, c.srv.URL, "test", DefaultLimits)
			byName := map[string]string{}
			for _, tool := range got {
				byName[tool.Name] = tool.Description
			}
			if err != nil || len(got) != 3 || byName["get\x00weather"] != "nul" || byName["a"] != "first" {
				t.Errorf("%v %+v", err, got)
			}
		})
	}
}

// The tap passes every other request on whole, the caller's request
// untouched, a body longer than it peeks at too.
func TestTapPassesRequestsOn(t *testing.T) {
	var got []string
	tap := &listTap{max: 10, base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		got = append(got, string(b))
		return &http.Response{StatusCode: 202, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}}, nil
	})}
	long := `{"jsonrpc":"2.0","method":"notifications/message","params":{"x":"` + strings.Repeat("y", 2*maxRequestPeek) + `"}}`
	for _, body := range []string{`{"jsonrpc":"2.0","id":1,"method":"initialize"}`, long} {
		req, err := http.NewRequest(http.MethodPost, "http://mcp.example/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		orig := req.Body
		resp, err := tap.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if req.Body != orig {
			t.Error("the caller's request was changed")
		}
	}
	if len(got) != 2 || got[0] != `{"jsonrpc":"2.0","id":1,"method":"initialize"}` || got[1] != long {
		t.Errorf("bodies sent: %d, the long one whole: %v", len(got), len(got) == 2 && got[1] == long)
	}
}
