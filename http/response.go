package httpapi

// Writing an answer: the body, its status, and the ETag of GETs.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
)

// writeOK encodes a success, with ETag and 304 for GET 200.
func (s *Server) writeOK(w http.ResponseWriter, r *http.Request, rt Route, out any) int {
	if st, ok := out.(streamOut); ok {
		st(w, r)
		return http.StatusOK
	}
	status := rt.Status
	if ws, ok := out.(withStatus); ok {
		status, out = ws.Status, ws.Body
	}
	if rt.Status == http.StatusNoContent || (out == nil && rt.Resp == nil) {
		w.WriteHeader(rt.Status)
		return rt.Status
	}
	var body []byte
	ctype := "application/json"
	if raw, ok := out.([]byte); ok && rt.RawBody != "" {
		body, ctype = raw, rt.RawBody
	} else if ra, ok := out.(rawAnswer); ok {
		body, ctype = ra.Body, ra.ContentType
	} else {
		var err error
		if body, err = json.Marshal(out); err != nil {
			s.log.Error("encode response", "path", r.URL.Path, "error", err)
			writeEnvelope(w, versionOf(r.URL.Path), apiErr("InternalError", "internal", "internal error"))
			return http.StatusInternalServerError
		}
	}
	if r.Method == http.MethodGet && status == http.StatusOK {
		sum := sha256.Sum256(body)
		etag := `"` + hex.EncodeToString(sum[:]) + `"`
		w.Header().Set("ETag", etag)
		if etagMatches(r.Header.Get("If-None-Match"), etag) {
			w.WriteHeader(http.StatusNotModified)
			return http.StatusNotModified
		}
	}
	w.Header().Set("Content-Type", ctype)
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return status
}

// rawAnswer is a success body in another format than JSON, chosen by the
// request (the scoreboard's format=csv).
type rawAnswer struct {
	ContentType string
	Body        []byte
}

// withStatus lets a handler answer a documented non-default status with a
// body of its own (the probes' 503).
type withStatus struct {
	Status int
	Body   any
}

func etagMatches(header, etag string) bool {
	for _, part := range strings.Split(header, ",") {
		p := strings.TrimPrefix(strings.TrimSpace(part), "W/")
		if p == etag || p == "*" {
			return true
		}
	}
	return false
}
