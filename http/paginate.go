package httpapi

import (
	"errors"
	"strconv"
	"strings"

	"svc/persistence"
)

// Page size bounds (CONTRACT §10).
const (
	defaultLimit = 50
	maxLimit     = 500
)

// pageQuery documents the pagination parameters.
var pageQuery = []QueryParam{
	{Name: "limit", Type: "integer", Description: "page size, default 50, at most 500 (larger values are clamped)"},
	{Name: "offset", Type: "integer", Description: "rows to skip; ignored when cursor is given"},
	{Name: "cursor", Type: "string", Description: "opaque cursor from a previous response's X-Next-Cursor header"},
}

// page parses limit, offset and cursor (400 when malformed). A limit or
// offset that is present but empty (limit=) is malformed too: it is not a
// non-negative integer (CONTRACT §10).
func (c *Call) page() (persistence.Page, error) {
	q := c.R.URL.Query()
	p := persistence.Page{Limit: defaultLimit}
	if q.Has("limit") {
		n, err := nonNegative(q.Get("limit"))
		if err != nil {
			return p, badRequest("invalid_limit", "limit must be a non-negative integer")
		}
		p.Limit = min(n, maxLimit)
		if p.Limit == 0 {
			p.Limit = defaultLimit
		}
	}
	if q.Has("offset") {
		n, err := nonNegative(q.Get("offset"))
		if err != nil {
			return p, badRequest("invalid_offset", "offset must be a non-negative integer")
		}
		p.Offset = n
	}
	if v := q.Get("cursor"); v != "" {
		seq, err := persistence.DecodeCursor(v)
		if err != nil {
			return p, badRequest("invalid_cursor", "cursor does not decode")
		}
		p.After, p.Offset = seq, 0
	}
	return p, nil
}

// nonNegative parses a non-negative integer. One too large for an int is
// the largest int (a limit is clamped to 500 anyway, an offset past the end
// is an empty page): only what is not a non-negative integer fails.
func nonNegative(v string) (int, error) {
	n, err := strconv.Atoi(v)
	// Atoi reports a range error before it looks at the rest of the text:
	// 99999999999999999999x is out of range and not a number at all.
	if errors.Is(err, strconv.ErrRange) && n > 0 && digits(strings.TrimPrefix(v, "+")) {
		return n, nil
	}
	if err == nil && n < 0 {
		err = errors.New("negative")
	}
	return n, err
}

// digits reports whether s is one or more ASCII digits.
func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// paginate trims the limit+1 rows read to one page and sets X-Next-Cursor
// when more rows follow (SPEC 4.1).
func paginate[T any](c *Call, p persistence.Page, rows []T, seq func(T) int64) []T {
	if len(rows) > p.Limit {
		rows = rows[:p.Limit]
		c.Header().Set("X-Next-Cursor", persistence.EncodeCursor(seq(rows[len(rows)-1])))
	}
	return rows
}
