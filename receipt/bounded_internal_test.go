package receipt

import (
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// chunked yields a long line in pieces, never held whole.
type chunked struct {
	n    int // bytes of 'a' left
	tail string
}

func (c *chunked) Read(p []byte) (int, error) {
	if c.n > 0 {
		k := min(c.n, len(p))
		for i := range k {
			p[i] = 'a'
		}
		c.n -= k
		return k, nil
	}
	if c.tail == "" {
		return 0, io.EOF
	}
	k := copy(p, c.tail)
	c.tail = c.tail[k:]
	return k, nil
}

// The line reader holds at most max bytes of a line of any length.
func TestLineReaderIsBounded(t *testing.T) {
	const maxLine = 1000
	lr := newLineReader(&chunked{n: 16 << 20, tail: "\nshort\r\n" + strings.Repeat("b", maxLine) + "\n" + strings.Repeat("c", maxLine+1) + "\nlast"}, maxLine)
	type got struct {
		line    string
		tooLong bool
	}
	var lines []got
	for {
		l, long, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, got{string(l), long})
		if cap(lr.buf) > 2*maxLine {
			t.Fatalf("the reader holds %d bytes for lines of at most %d", cap(lr.buf), maxLine)
		}
	}
	want := []got{{"", true}, {"short\r", false}, {strings.Repeat("b", maxLine), false}, {"", true}, {"last", false}}
	if !slices.Equal(lines, want) {
		t.Errorf("lines %.200v, want %.200v", lines, want)
	}
	// A read that fails is an error, not an end.
	lr = newLineReader(io.MultiReader(strings.NewReader("a\nb"), failing{}), maxLine)
	if l, _, err := lr.next(); err != nil || string(l) != "a" {
		t.Fatalf("first line %q, %v", l, err)
	}
	if _, _, err := lr.next(); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("a failing reader: %v", err)
	}
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("disk gone") }

// With keep, the verifier holds fewer than 2*keep failures at any time,
// and finish lists exactly the first keep of what it lists without keep,
// whatever order failures arrive in (a signature fails when its batch
// settles, after later receipts' failures).
func TestChainVerifierKeepsTheFirstFailures(t *testing.T) {
	rng := rand.New(rand.NewPCG(35, 5))
	type failure struct{ index, rank int }
	for round := range 50 {
		var arrivals []failure
		for i := range 2000 {
			if rng.IntN(3) == 0 {
				arrivals = append(arrivals, failure{i, 1})
			}
			if rng.IntN(4) == 0 {
				arrivals = append(arrivals, failure{i, 0})
			}
		}
		// Delay some by up to batchSize places, as a batch does.
		for k := range arrivals {
			if j := k + rng.IntN(batchSize); rng.IntN(5) == 0 && j < len(arrivals) {
				arrivals[k], arrivals[j] = arrivals[j], arrivals[k]
			}
		}
		keep := 1 + rng.IntN(150)
		all, bounded := chainVerifier{}, chainVerifier{keep: keep}
		for k, f := range arrivals {
			msg := string(rune('a'+k%26)) + strings.Repeat("x", k%3)
			all.failRanked(f.index, "", msg, f.rank)
			bounded.failRanked(f.index, "", msg, f.rank)
			if len(bounded.found) >= 2*keep {
				t.Fatalf("round %d: %d failures held with keep %d", round, len(bounded.found), keep)
			}
		}
		all.finish()
		bounded.finish()
		want := all.errs[:min(keep, len(all.errs))]
		if !slices.Equal(bounded.errs, want) {
			t.Fatalf("round %d, keep %d: kept\n%v\nwant\n%v", round, keep, bounded.errs, want)
		}
		if bounded.total != len(arrivals) || all.total != len(arrivals) {
			t.Fatalf("round %d: totals %d and %d, want %d", round, bounded.total, all.total, len(arrivals))
		}
	}
}

func TestClip(t *testing.T) {
	if s := clip("short"); s != "short" {
		t.Errorf("clip(short) = %q", s)
	}
	long := strings.Repeat("é", 1000) // 2 bytes each: a cut falls inside one
	s := clip(long)
	if len(s) > maxErrorText+3 || !strings.HasSuffix(s, "...") || !strings.HasPrefix(long, strings.TrimSuffix(s, "...")) {
		t.Errorf("clip: %d bytes, %q", len(s), s)
	}
}
