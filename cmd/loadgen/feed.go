package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // RFC 6455's handshake is defined with SHA-1
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
)

// feedSubscribers keeps n live-feed WebSocket subscribers (GET
// /v2/ws/events) reading for the whole run, so that the benchmark measures
// authorize with the SOC pipeline's fan-out busy. It counts the frames they
// receive and the subscribers the server disconnects.
//
// Like the raw HTTP client, a subscriber speaks just enough of the protocol
// (RFC 6455: the opening handshake, then frame headers, payloads skipped
// unread) to cost the shared CPU little: the subscribers of a real
// deployment run on the operators' machines, not beside the gateway, and a
// WebSocket library's reader cost here about 5 µs per frame, which at three
// subscribers was CPU taken from the server being measured.
type feedSubscribers struct {
	frames, ended atomic.Int64
	conns         []net.Conn
	stopping      atomic.Bool
	wg            sync.WaitGroup
}

// wsGUID is RFC 6455's handshake constant.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

func startFeedSubscribers(ctx context.Context, base, token string, n int) (*feedSubscribers, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" {
		return nil, fmt.Errorf("feed subscribers need an http:// URL (got %q)", base)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	f := &feedSubscribers{}
	for range n {
		conn, br, err := wsHandshake(ctx, addr, u.Host, "/v2/ws/events", token)
		if err != nil {
			f.stop()
			return nil, err
		}
		f.conns = append(f.conns, conn)
		f.wg.Go(func() { f.read(conn, br) })
	}
	return f, nil
}

// wsHandshake opens a WebSocket connection: the upgrade request, and a 101
// answer carrying the accept value of our key.
func wsHandshake(ctx context.Context, addr, host, path, token string) (net.Conn, *bufio.Reader, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	key := base64.StdEncoding.EncodeToString(raw[:])
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + key + "\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer " + token + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	_ = resp.Body.Close()
	sum := sha1.Sum([]byte(key + wsGUID)) //nolint:gosec // see the import
	if resp.StatusCode != http.StatusSwitchingProtocols ||
		resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("live feed: handshake answered %s", resp.Status)
	}
	return conn, br, nil
}

// read counts complete messages until the connection ends (readFrames
// returns only then); an end before stop is the server disconnecting the
// subscriber.
func (f *feedSubscribers) read(conn net.Conn, br *bufio.Reader) {
	defer func() { _ = conn.Close() }()
	_ = readFrames(br, func(opcode byte, fin bool) error {
		switch {
		case opcode == 0x8:
			return io.EOF // the server closed the feed
		case fin && (opcode == 0x0 || opcode == 0x1 || opcode == 0x2):
			f.frames.Add(1)
		}
		return nil
	})
	if !f.stopping.Load() {
		f.ended.Add(1)
	}
}

// readFrames reads server frames (unmasked, RFC 6455 section 5.2),
// skipping their payloads, and calls on for each until it or the reader
// fails, and returns that error. Control frames other than close (ping,
// pong) are skipped: the gateway does not ping.
func readFrames(br *bufio.Reader, on func(opcode byte, fin bool) error) error {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(br, hdr[:2]); err != nil {
			return err
		}
		fin, opcode := hdr[0]&0x80 != 0, hdr[0]&0x0f
		masked, n := hdr[1]&0x80 != 0, uint64(hdr[1]&0x7f)
		switch n {
		case 126:
			if _, err := io.ReadFull(br, hdr[:2]); err != nil {
				return err
			}
			n = uint64(binary.BigEndian.Uint16(hdr[:2]))
		case 127:
			if _, err := io.ReadFull(br, hdr[:8]); err != nil {
				return err
			}
			n = binary.BigEndian.Uint64(hdr[:8])
		}
		if masked {
			n += 4
		}
		if n > 1<<30 {
			return errors.New("live feed: frame too large")
		}
		if _, err := br.Discard(int(n)); err != nil {
			return err
		}
		if err := on(opcode, fin); err != nil {
			return err
		}
	}
}

func (f *feedSubscribers) stop() {
	f.stopping.Store(true)
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.wg.Wait()
}
