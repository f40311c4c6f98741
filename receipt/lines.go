package receipt

import (
	"bufio"
	"errors"
	"io"
)

// lineReader reads an export one line at a time in bounded memory: a line
// longer than max bytes is not buffered but read past to its end and
// reported as too long, so that one line of any length (a 1 GiB line, a
// file with no newline) costs at most max bytes. bufio.Scanner would
// instead stop the whole read at such a line.
type lineReader struct {
	br  *bufio.Reader
	buf []byte // the current line, grown up to max+1 bytes
	max int
}

// lineReadSize is the reader's buffer; lines are gathered from its
// fragments into buf, which grows only as far as the longest line kept.
const lineReadSize = 64 << 10

func newLineReader(r io.Reader, maxLine int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, lineReadSize), max: maxLine}
}

// next returns the next line without its '\n' (valid until the next call),
// or tooLong, with no line, when it held more than max bytes. err is
// io.EOF after the last line, or the reader's own error.
func (l *lineReader) next() (line []byte, tooLong bool, err error) {
	l.buf = l.buf[:0]
	read := false
	for {
		frag, err := l.br.ReadSlice('\n')
		read = read || len(frag) > 0
		end := err == nil
		if end {
			frag = frag[:len(frag)-1]
		}
		if !tooLong {
			if len(l.buf)+len(frag) > l.max {
				tooLong, l.buf = true, l.buf[:0]
			} else {
				l.buf = append(l.buf, frag...)
			}
		}
		switch {
		case end:
			return l.lineOrNil(tooLong), tooLong, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && read:
			return l.lineOrNil(tooLong), tooLong, nil // a last line without '\n'
		default:
			return nil, false, err
		}
	}
}

func (l *lineReader) lineOrNil(tooLong bool) []byte {
	if tooLong {
		return nil
	}
	return l.buf
}
