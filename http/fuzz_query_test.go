package httpapi

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"testing"

	"svc/persistence"
)

// FuzzPageQuery (issue 20): the pagination parameters limit, offset and
// cursor, parsed by (*Call).page and nonNegative, from an arbitrary raw
// query string and from arbitrary parameter values. Parsing never panics;
// the result is what an independent reading of CONTRACT §10 gives
// (pageOracle: limit 1..500, default 50 (also for 0), larger values
// clamped; offset any non-negative integer, one too large for an int read
// as the largest int; either given empty is malformed; cursor as
// persistence.DecodeCursor reads it, and then offset 0); an
// error is always a *Error whose status, and whose rendered envelope's
// status, is 400 with the parameter's code, never a 5xx; a valid limit,
// offset and cursor (EncodeCursor of a row seq) round-trip. The seed corpus
// is the f.Add calls below plus testdata/fuzz/FuzzPageQuery/;
// scripts/fuzz.sh fuzzes it for a few seconds.
func FuzzPageQuery(f *testing.F) {
	f.Add("limit=10&offset=20", "10", "20", "", 10, int64(1))
	f.Add("limit=0", "0", "", "", 0, int64(0))
	f.Add("limit=501&offset=0", "501", "0", "", 501, int64(500))
	f.Add("limit=-1", "-1", "", "", -1, int64(-1))
	f.Add("limit=%2B5&offset=-0", "+5", "-0", "", 5, int64(2))
	f.Add("limit=99999999999999999999999", "99999999999999999999999", "", "", math.MaxInt, int64(math.MaxInt64))
	f.Add("offset=-99999999999999999999999", "", "-99999999999999999999999", "", math.MinInt, int64(math.MinInt64))
	f.Add("cursor=000000000000002a&offset=7", "", "7", "000000000000002a", 7, int64(42))
	f.Add("cursor=0000000000000000", "", "", "0000000000000000", 3, int64(0))
	f.Add("cursor=8000000000000000&limit=1", "1", "", "8000000000000000", 1, int64(1<<53))
	f.Add("limit=1&limit=x;offset=%zz&cursor", "1 ", " 1", "zz", 2, int64(3))
	f.Add("limit=0x10&offset=1e3&offset=5", "0x10", "1_000", "00000000000000001", 16, int64(16))
	f.Add("limit=99999999999999999999x&offset=18446744073709551616junk", "+018446744073709551616.0", "18446744073709551615x", "", 3, int64(3)) // once accepted as the largest int (Atoi reports the range before the junk)
	f.Add("limit=%EF%BC%91", "\uff11", "\u0661", "\xff", 1, int64(1))
	f.Fuzz(func(t *testing.T, rawQuery, limit, offset, cursor string, n int, seq int64) {
		// An arbitrary query string.
		u := &url.URL{Path: "/v1/audit", RawQuery: rawQuery}
		checkPage(t, u)

		// Arbitrary parameter values.
		q := url.Values{}
		for name, v := range map[string]string{"limit": limit, "offset": offset, "cursor": cursor} {
			if v != "" {
				q.Set(name, v)
			}
		}
		checkPage(t, &url.URL{Path: "/v1/audit", RawQuery: q.Encode()})

		// nonNegative alone.
		got, err := nonNegative(limit)
		want, ok := nonNegativeOracle(limit)
		if (err == nil) != ok || (ok && got != want) {
			t.Fatalf("nonNegative(%q) = %d, %v; want %d, ok %v", limit, got, err, want, ok)
		}

		// Valid values round-trip.
		p, perr := pageOf(&url.URL{RawQuery: url.Values{"limit": {strconv.Itoa(n)}, "offset": {strconv.Itoa(n)}}.Encode()})
		switch {
		case n < 0:
			if perr == nil || errorCode(perr) != "invalid_limit" {
				t.Fatalf("limit %d: page = %+v, %v; want invalid_limit", n, p, perr)
			}
		case perr != nil:
			t.Fatalf("limit and offset %d: %v", n, perr)
		case p.Offset != n || p.After != 0:
			t.Fatalf("offset %d read as %+v", n, p)
		case n == 0 && p.Limit != defaultLimit, n > 0 && p.Limit != min(n, maxLimit):
			t.Fatalf("limit %d read as %d", n, p.Limit)
		}
		if seq >= 1 {
			c := persistence.EncodeCursor(seq)
			p, err := pageOf(&url.URL{RawQuery: "offset=9&cursor=" + c})
			if err != nil || p.After != seq || p.Offset != 0 || p.Limit != defaultLimit {
				t.Fatalf("cursor %q of seq %d read as %+v, %v", c, seq, p, err)
			}
		}
	})
}

func pageOf(u *url.URL) (persistence.Page, error) {
	c := &Call{R: &http.Request{Method: http.MethodGet, URL: u, Header: http.Header{}}}
	return c.page()
}

func errorCode(err error) string {
	var ae *Error
	if !errors.As(err, &ae) {
		return ""
	}
	code, _ := ae.Details["error"].(string)
	return code
}

// checkPage parses u's pagination parameters and compares the result with
// pageOracle's.
func checkPage(t *testing.T, u *url.URL) {
	t.Helper()
	p, err := pageOf(u)
	want, wantCode := pageOracle(u.Query())
	if err == nil {
		if wantCode != "" {
			t.Fatalf("query %q: page = %+v, want error %s", u.RawQuery, p, wantCode)
		}
		if p != want {
			t.Fatalf("query %q: page = %+v, want %+v", u.RawQuery, p, want)
		}
		if p.Limit < 1 || p.Limit > maxLimit || p.Offset < 0 || p.After < 0 {
			t.Fatalf("query %q: page %+v out of bounds", u.RawQuery, p)
		}
		return
	}
	var ae *Error
	if !errors.As(err, &ae) {
		t.Fatalf("query %q: error %v (%T) is not an API error", u.RawQuery, err, err)
	}
	if got := errorCode(err); got != wantCode || ae.Status() != http.StatusBadRequest {
		t.Fatalf("query %q: error %s (status %d), want %q (400)", u.RawQuery, got, ae.Status(), wantCode)
	}
	mapped, logged := toAPIError(err)
	if mapped != ae || logged {
		t.Fatalf("query %q: toAPIError turned %v into %v (logged %v)", u.RawQuery, ae, mapped, logged)
	}
	rec := httptest.NewRecorder()
	writeEnvelope(rec, "v1", ae)
	var env struct {
		Code   int    `json:"code"`
		Reason string `json:"reason"`
	}
	if rec.Code != http.StatusBadRequest || json.Unmarshal(rec.Body.Bytes(), &env) != nil || env.Code != http.StatusBadRequest || env.Reason != "BadRequest" {
		t.Fatalf("query %q: rendered as %d %s", u.RawQuery, rec.Code, rec.Body.Bytes())
	}
}

// pageOracle reads the pagination parameters of q as CONTRACT §10 and the
// query parameter docs (pageQuery) describe them; code is the error code of
// the first bad parameter (limit, then offset, then cursor), "" when none.
// A limit or offset given empty (limit=) is malformed; an empty cursor is
// no cursor.
func pageOracle(q url.Values) (p persistence.Page, code string) {
	p.Limit = defaultLimit
	if q.Has("limit") { // present but empty (limit=) is no integer either
		n, ok := nonNegativeOracle(q.Get("limit"))
		if !ok {
			return persistence.Page{}, "invalid_limit"
		}
		if n > 0 {
			p.Limit = min(n, maxLimit)
		}
	}
	if q.Has("offset") {
		n, ok := nonNegativeOracle(q.Get("offset"))
		if !ok {
			return persistence.Page{}, "invalid_offset"
		}
		p.Offset = n
	}
	if v := q.Get("cursor"); v != "" {
		seq, err := persistence.DecodeCursor(v)
		if err != nil {
			return persistence.Page{}, "invalid_cursor"
		}
		p.After, p.Offset = seq, 0
	}
	return p, ""
}

// decimal is what strconv.Atoi reads: an optional sign and ASCII digits.
var decimal = regexp.MustCompile(`^[+-]?[0-9]+$`)

// nonNegativeOracle reads v as a non-negative decimal integer of any size
// (math/big), the largest int standing for one beyond it.
func nonNegativeOracle(v string) (int, bool) {
	if !decimal.MatchString(v) {
		return 0, false
	}
	n, ok := new(big.Int).SetString(v, 10)
	switch {
	case !ok || n.Sign() < 0:
		return 0, false
	case !n.IsInt64() || n.Int64() > math.MaxInt:
		return math.MaxInt, true
	}
	return int(n.Int64()), true
}
