package mcpclient

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"

	"svc/rules/manifest"
)

// listTap reads the tools of every tools/list answer off the wire as the
// answer streams by, one tool at a time, and hands the SDK the same answer
// with an empty tools array: the SDK still speaks the protocol (version
// negotiation, the session, headers, pages through nextCursor) but never
// holds the list.
//
// Why: the SDK decodes an answer whole (an SSE event's data line read into
// one growing buffer, then the JSON-RPC message, then the result into its
// types, a schema as map[string]any that the gateway encoded again). For a
// manifest within the caps (400 tools of 16 KiB, 6.4 MB) a discovery
// allocated about 50 times the manifest and held several copies at once;
// read here, a discovery holds the tools once, plus one tool's bytes in
// the decoder's buffer (BenchmarkMCPDiscovery in actors has the figures).
type listTap struct {
	base http.RoundTripper
	max  int

	mu    sync.Mutex
	tools []manifest.Tool
	// refused is the first reason the tap refused an answer (too many
	// tools, not JSON-RPC): the SDK reports a failed read, which
	// classify replaces with it.
	refused error
}

// maxRequestPeek bounds what the tap reads of a request to find its
// method: the SDK's own requests are small.
const maxRequestPeek = 64 << 10

func (t *listTap) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.Body == nil {
		return t.base.RoundTrip(req)
	}
	req, list, err := peek(req)
	if err != nil {
		return nil, err
	}
	if !list {
		return t.base.RoundTrip(req)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		var out bytes.Buffer
		err := t.strip(resp.Body, &out)
		_ = resp.Body.Close()
		if err != nil {
			return nil, t.refuse(err)
		}
		resp.Body = io.NopCloser(&out)
		resp.ContentLength = int64(out.Len())
		resp.Header.Set("Content-Length", strconv.Itoa(out.Len()))
	case "text/event-stream":
		resp.Body = &sseStrip{src: bufio.NewReaderSize(resp.Body, 64<<10), body: resp.Body, tap: t}
	}
	return resp, nil
}

// peek reads req's body and returns a copy of req that sends it (a
// RoundTripper does not change its caller's request), and whether it is a
// tools/list request. A body longer than any the SDK sends is passed on
// as it is, unread past maxRequestPeek.
func peek(req *http.Request) (*http.Request, bool, error) {
	raw, err := io.ReadAll(io.LimitReader(req.Body, maxRequestPeek+1))
	if err != nil {
		_ = req.Body.Close()
		return nil, false, err
	}
	out := req.Clone(req.Context())
	if len(raw) > maxRequestPeek {
		out.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(raw), req.Body), req.Body}
		return out, false, nil
	}
	_ = req.Body.Close()
	out.Body = io.NopCloser(bytes.NewReader(raw))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil }
	var m struct {
		Method string `json:"method"`
	}
	return out, json.Unmarshal(raw, &m) == nil && m.Method == "tools/list", nil
}

// refuse records the first reason an answer was refused and returns it.
func (t *listTap) refuse(err error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.refused == nil {
		t.refused = err
	}
	return t.refused
}

func (t *listTap) why() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refused
}

// listed returns the tools read so far.
func (t *listTap) listed() []manifest.Tool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tools
}

func (t *listTap) add(tool manifest.Tool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.tools) == t.max {
		return fmt.Errorf("%w: more than %d tools", ErrTooLarge, t.max)
	}
	t.tools = append(t.tools, tool)
	return nil
}

// wireTool is what the gateway keeps of a listed tool.
type wireTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations *struct {
		ReadOnlyHint *bool `json:"readOnlyHint"`
	} `json:"annotations"`
}

// readOnly is annotations.readOnlyHint, false when absent.
func (w wireTool) readOnly() bool {
	return w.Annotations != nil && w.Annotations.ReadOnlyHint != nil && *w.Annotations.ReadOnlyHint
}

// strip reads one JSON-RPC message from r and writes it to out, compact,
// with the tools of its result (if any) replaced by an empty array; each
// tool read is added to the tap's list.
func (t *listTap) strip(r io.Reader, out *bytes.Buffer) error {
	dec := json.NewDecoder(r)
	if err := delim(dec, '{'); err != nil {
		return err
	}
	out.WriteByte('{')
	for n := 0; dec.More(); n++ {
		key, err := memberName(dec, out, n)
		if err != nil {
			return err
		}
		if key != "result" {
			if err := copyValue(dec, out); err != nil {
				return err
			}
			continue
		}
		if err := t.stripResult(dec, out); err != nil {
			return err
		}
	}
	if err := delim(dec, '}'); err != nil {
		return err
	}
	out.WriteByte('}')
	// Nothing but white space may follow the message.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: more than one JSON value in an answer", ErrProtocol)
	}
	return nil
}

// stripResult copies a result object, reading its tools array into the tap.
func (t *listTap) stripResult(dec *json.Decoder, out *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return malformed(err)
	}
	if tok != json.Delim('{') {
		// Not an object: the SDK refuses it as it would have.
		return copyScalar(tok, out)
	}
	out.WriteByte('{')
	for n := 0; dec.More(); n++ {
		key, err := memberName(dec, out, n)
		if err != nil {
			return err
		}
		if key != "tools" {
			if err := copyValue(dec, out); err != nil {
				return err
			}
			continue
		}
		if err := t.readTools(dec); err != nil {
			return err
		}
		out.WriteString("[]")
	}
	if err := delim(dec, '}'); err != nil {
		return err
	}
	out.WriteByte('}')
	return nil
}

// readTools reads a tools array one tool at a time.
func (t *listTap) readTools(dec *json.Decoder) error {
	tok, err := dec.Token()
	switch {
	case err != nil:
		return malformed(err)
	case tok == nil:
		return nil
	case tok != json.Delim('['):
		return fmt.Errorf("%w: tools is not an array", ErrProtocol)
	}
	for dec.More() {
		var w wireTool
		if err := dec.Decode(&w); err != nil {
			return malformed(err)
		}
		if err := t.add(manifest.Tool{Name: w.Name, Description: w.Description, InputSchema: w.InputSchema, ReadOnly: w.readOnly()}); err != nil {
			return err
		}
	}
	return delim(dec, ']')
}

// memberName reads an object member's name and writes it (after a comma
// unless it is the n-th, n = 0) and its colon to out.
func memberName(dec *json.Decoder, out *bytes.Buffer, n int) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", malformed(err)
	}
	key, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("%w: an object member without a name", ErrProtocol)
	}
	if n > 0 {
		out.WriteByte(',')
	}
	enc, err := json.Marshal(key)
	if err != nil {
		return "", malformed(err)
	}
	out.Write(enc)
	out.WriteByte(':')
	return key, nil
}

// copyValue copies the next value, compact (an SSE data line holds no line
// break).
func copyValue(dec *json.Decoder, out *bytes.Buffer) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return malformed(err)
	}
	if err := json.Compact(out, raw); err != nil {
		return malformed(err)
	}
	return nil
}

// copyScalar writes a token Token returned that is not a delimiter.
func copyScalar(tok json.Token, out *bytes.Buffer) error {
	if _, ok := tok.(json.Delim); ok {
		return fmt.Errorf("%w: a result that is neither an object nor a scalar", ErrProtocol)
	}
	enc, err := json.Marshal(tok)
	if err != nil {
		return malformed(err)
	}
	out.Write(enc)
	return nil
}

func delim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return malformed(err)
	}
	if tok != want {
		return fmt.Errorf("%w: expected %q in a JSON-RPC message", ErrProtocol, want)
	}
	return nil
}

func malformed(err error) error {
	switch {
	case errors.Is(err, ErrTooLarge) || errors.Is(err, ErrProtocol) || errors.Is(err, errCap):
		return err
	case errors.Is(err, io.EOF): // within a message: it was cut short
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("%w: an answer that is not JSON-RPC: %w", ErrProtocol, err)
}
