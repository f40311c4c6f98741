package packcontents

import (
	"encoding/json"
	"io"
	"time"

	"svc/evidencepack"
	"svc/persistence"
)

// packPage is the page size of the compliance pack's reads; receipts are
// read packPage at a time too (not the receipt export's 5,000): what a
// pack holds at once sets the Go heap's live size, and with the collector's
// headroom (SVC_GC_PERCENT) a multiple of it in resident memory.
const packPage = 500

// jsonArray writes a file holding a JSON array whose elements fill adds as
// it reads them, one per line: a list of any length in little memory.
func jsonArray(p *evidencepack.Writer, name string, fill func(add func(any)) error) error {
	w, err := p.Create(name)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	sep := "[\n"
	var werr error
	err = fill(func(v any) {
		if werr == nil {
			if _, werr = io.WriteString(w, sep); werr == nil {
				werr = enc.Encode(v)
			}
			sep = ","
		}
	})
	if err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	if sep == "[\n" {
		_, err = io.WriteString(w, "[]\n")
	} else {
		_, err = io.WriteString(w, "]\n")
	}
	return err
}

// pages reads a newest-first list a page at a time (by its seq cursor)
// and hands each row to each until it returns false or the list ends.
func pages[T any](list func(persistence.Page) ([]T, error), seq func(T) int64, each func(T) bool) error {
	for pg := (persistence.Page{Limit: packPage}); ; {
		rows, err := list(pg)
		if err != nil {
			return err
		}
		more := len(rows) > pg.Limit // the store reads one row past the page
		rows = rows[:min(len(rows), pg.Limit)]
		for _, r := range rows {
			if !each(r) {
				return nil
			}
		}
		if !more || len(rows) == 0 {
			return nil
		}
		pg.After = seq(rows[len(rows)-1])
	}
}

// inRange keeps the rows of a newest-first list whose time is within
// [from, to) and stops once a whole page has gone by older than from (rows
// are in time order but for clock skew between nodes).
func inRange[T any](from, to time.Time, at func(T) time.Time, keep func(T)) func(T) bool {
	older := 0
	return func(r T) bool {
		t := at(r)
		switch {
		case t.Before(from):
			older++
			return older < packPage
		case t.Before(to):
			keep(r)
		}
		older = 0
		return true
	}
}
