// One WebSocket client connection: the handshake, masked frames out,
// frames in (pings answered on the way).

package main

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
)

// 64 B, the size of the suite's other small bodies.
var message = []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")

const (
	opText   = 0x1
	opBinary = 0x2
	opClose  = 0x8
	opPing   = 0x9
	opPong   = 0xA
)

var errClosed = errors.New("server closed the session")

type conn struct {
	net.Conn
	r       *bufio.Reader
	w       *bufio.Writer
	writeMu sync.Mutex
}

func dial(target *url.URL) (*conn, error) {
	c, err := net.DialTimeout("tcp", target.Host, 10*time.Second)
	if err != nil {
		return nil, err
	}
	raw := make([]byte, 16)
	rand.Read(raw)
	key := base64.StdEncoding.EncodeToString(raw)
	path := target.RequestURI()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", path, target.Host, key)
	r := bufio.NewReaderSize(c, 64*1024)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	status, err := r.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, err
	}
	if !strings.Contains(status+" ", " 101 ") {
		c.Close()
		return nil, fmt.Errorf("handshake answered %q", strings.TrimSpace(status))
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	accept := base64.StdEncoding.EncodeToString(sum[:])
	accepted := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			c.Close()
			return nil, err
		}
		line = strings.TrimSpace(line)
		if line == "" {
			break
		}
		name, value, _ := strings.Cut(line, ":")
		if strings.EqualFold(strings.TrimSpace(name), "sec-websocket-accept") &&
			strings.TrimSpace(value) == accept {
			accepted = true
		}
	}
	if !accepted {
		c.Close()
		return nil, errors.New("handshake without the right Sec-WebSocket-Accept")
	}
	c.SetReadDeadline(time.Time{})
	return &conn{Conn: c, r: r, w: bufio.NewWriterSize(c, 64*1024)}, nil
}

// clientFrame is one masked frame (RFC 6455 5.3: clients mask).
func clientFrame(opcode byte, payload []byte) []byte {
	n := len(payload)
	head := []byte{0x80 | opcode}
	switch {
	case n < 126:
		head = append(head, 0x80|byte(n))
	case n < 65536:
		head = append(head, 0x80|126, byte(n>>8), byte(n))
	default:
		head = append(head, 0x80|127)
		head = binary.BigEndian.AppendUint64(head, uint64(n))
	}
	mask := make([]byte, 4)
	rand.Read(mask)
	out := append(head, mask...)
	for i, b := range payload {
		out = append(out, b^mask[i%4])
	}
	return out
}

func (c *conn) send(frame []byte, flush bool) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if _, err := c.w.Write(frame); err != nil {
		return err
	}
	if flush {
		return c.w.Flush()
	}
	return nil
}

func (c *conn) flush() error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	return c.w.Flush()
}

// receive is the next data message; pings are answered on the way (uvicorn
// pings idle clients).
func (c *conn) receive(buf []byte) ([]byte, error) {
	for {
		var head [2]byte
		if _, err := io.ReadFull(c.r, head[:]); err != nil {
			return nil, err
		}
		n := uint64(head[1] & 0x7F)
		switch n {
		case 126:
			var ext [2]byte
			if _, err := io.ReadFull(c.r, ext[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(ext[:]))
		case 127:
			var ext [8]byte
			if _, err := io.ReadFull(c.r, ext[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(ext[:])
		}
		var mask [4]byte
		masked := head[1]&0x80 != 0
		if masked {
			if _, err := io.ReadFull(c.r, mask[:]); err != nil {
				return nil, err
			}
		}
		if uint64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		data := buf[:n]
		if _, err := io.ReadFull(c.r, data); err != nil {
			return nil, err
		}
		if masked {
			for i := range data {
				data[i] ^= mask[i%4]
			}
		}
		switch head[0] & 0x0F {
		case opPing:
			if err := c.send(clientFrame(opPong, data), true); err != nil {
				return nil, err
			}
		case opClose:
			return nil, errClosed
		case opText, opBinary, 0:
			return data, nil
		}
	}
}

func (c *conn) close() {
	payload := []byte{0x03, 0xE8} // 1000
	c.send(clientFrame(opClose, payload), true)
	c.Close()
}
