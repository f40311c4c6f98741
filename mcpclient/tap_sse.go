package mcpclient

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// maxFieldLine bounds an SSE line other than data (event, id, retry, a
// comment): the tap keeps it whole.
const maxFieldLine = 64 << 10

// sseStrip is the body of a tools/list answer sent as server-sent events,
// as the SDK reads it: each event passes through with its fields, and the
// data of a message event (no event name, or "message") is a JSON-RPC
// message read by the tap's strip as it streams in (never held whole) and
// written back without its tools. The data of other events, which the SDK
// ignores, is dropped unread.
type sseStrip struct {
	src  *bufio.Reader
	body io.Closer
	tap  *listTap
	out  []byte // the rest of the current event, rewritten
	err  error
}

func (s *sseStrip) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		s.out, s.err = s.next()
		if s.err != nil && s.err != io.EOF { //nolint:errorlint // io.EOF itself, the end of the stream, as Read returns it
			s.err = s.tap.refuse(s.err)
		}
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

func (s *sseStrip) Close() error { return s.body.Close() }

// next reads one event and returns it rewritten (io.EOF after the last).
func (s *sseStrip) next() ([]byte, error) {
	var ev bytes.Buffer
	name := ""
	for {
		if head, _ := s.src.Peek(len(dataField)); bytes.Equal(head, dataField) {
			// The data begins: it runs to the end of the event, over every
			// data line, with the other fields it meets kept.
			_, _ = s.src.Discard(len(dataField))
			return s.data(&ev, name)
		}
		line, err := s.fieldLine()
		if errors.Is(err, io.EOF) && line == nil {
			if ev.Len() > 0 {
				ev.WriteByte('\n')
			}
			return ev.Bytes(), io.EOF
		}
		if err != nil {
			return nil, err
		}
		if len(line) == 0 { // the end of the event
			if ev.Len() == 0 {
				continue
			}
			ev.WriteByte('\n')
			return ev.Bytes(), nil
		}
		field, value, found := bytes.Cut(line, []byte{':'})
		if !found {
			return nil, fmt.Errorf("%w: a malformed line in an event stream", ErrProtocol)
		}
		if string(field) == "event" {
			name = string(bytes.TrimSpace(value))
		}
		ev.Write(line)
		ev.WriteByte('\n')
	}
}

var dataField = []byte("data:")

// data reads the data of the event whose other fields so far are in ev,
// and returns the event rewritten.
func (s *sseStrip) data(ev *bytes.Buffer, name string) ([]byte, error) {
	d := &sseData{s: s, inLine: true, fields: ev}
	if name != "" && name != "message" { // the SDK ignores the event
		if _, err := io.Copy(io.Discard, d); err != nil {
			return nil, err
		}
		ev.WriteByte('\n')
		return ev.Bytes(), nil
	}
	br := bufio.NewReaderSize(d, 4<<10)
	for {
		c, err := br.ReadByte()
		if errors.Is(err, io.EOF) { // no data (a priming event): nothing for the SDK to decode
			ev.WriteByte('\n')
			return ev.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			_ = br.UnreadByte()
			break
		}
	}
	var msg bytes.Buffer
	if err := s.tap.strip(br, &msg); err != nil {
		return nil, err
	}
	ev.WriteString("data: ")
	ev.Write(msg.Bytes())
	ev.WriteString("\n\n")
	return ev.Bytes(), nil
}

// fieldLine reads a line that is not data: without its line end; nil and
// io.EOF at the end of the stream.
func (s *sseStrip) fieldLine() ([]byte, error) {
	var line []byte
	for {
		frag, err := s.src.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > maxFieldLine {
			return nil, fmt.Errorf("%w: an event-stream line longer than %d bytes", ErrProtocol, maxFieldLine)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) == 0:
			return nil, io.EOF
		case err != nil && !errors.Is(err, io.EOF):
			return nil, err
		}
		return trimEOL(line), nil
	}
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}

// sseData reads an event's data as one text: the data lines' values
// joined by line breaks, up to the blank line that ends the event (the
// other fields it passes are written to fields). It streams: a data line
// is read in the buffer's chunks, never held whole.
type sseData struct {
	s      *sseStrip
	cur    []byte // the unread rest of the current chunk
	inLine bool   // in a data line whose end has not been read
	done   bool
	fields *bytes.Buffer
}

func (d *sseData) Read(p []byte) (int, error) {
	for len(d.cur) == 0 {
		if d.done {
			return 0, io.EOF
		}
		if err := d.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, d.cur)
	d.cur = d.cur[n:]
	return n, nil
}

// fill reads the next chunk of the data.
func (d *sseData) fill() error {
	if d.inLine {
		return d.chunk()
	}
	// The line after a data line: another data line, another field, or
	// the blank line that ends the event.
	for {
		head, err := d.s.src.Peek(len(dataField))
		if len(head) == 0 && err != nil {
			d.done = true // the stream ended mid-event: the event ends with it
			return nil
		}
		if bytes.Equal(head, dataField) {
			_, _ = d.s.src.Discard(len(dataField))
			d.cur, d.inLine = []byte{'\n'}, true // the line break that joins data lines
			return nil
		}
		line, err := d.s.fieldLine()
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(line) == 0 {
			d.done = true
			return nil
		}
		if !bytes.Contains(line, []byte{':'}) {
			return fmt.Errorf("%w: a malformed line in an event stream", ErrProtocol)
		}
		d.fields.Write(line)
		d.fields.WriteByte('\n')
	}
}

// chunk reads the next piece of the current data line.
func (d *sseData) chunk() error {
	frag, err := d.s.src.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		d.cur = frag
		return nil
	case err != nil && !errors.Is(err, io.EOF):
		return err
	}
	d.cur, d.inLine = trimEOL(frag), false
	if errors.Is(err, io.EOF) {
		d.done = true
	}
	return nil
}
