// wsload: the suite's WebSocket load generator (wrk and h2load speak no
// WebSocket). Go's standard library only, so a fresh machine builds it
// offline, and fast enough that one core of it outruns one core of server:
// its Python predecessor was the bottleneck above 100k messages/s.
//
//	wsload -url ws://127.0.0.1:8000/ws/echo -connections 64 -duration 5 -mode echo
//	wsload -url ws://127.0.0.1:8000/ws/broadcast -connections 16 -messages 2500 -mode broadcast
//	wsload -url ws://127.0.0.1:8000/ws/echo -verify
//
// echo: every connection sends a 64 B message and waits for it back, for
// -duration seconds; one round trip is one message.
//
// broadcast, as Granian measures it: every client sends -messages messages
// without waiting, and receives every client's (its own included). Send,
// receive and combined throughput are each client's rate summed over the
// clients; combined counts a client's sent and received messages over the
// longer of its two times.
//
// Prints one line, "BENCH_JSON {...}", shaped like the suite's wrk script.
package main

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
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

type errorCounts struct {
	Connect int64 `json:"connect"`
	Read    int64 `json:"read"`
	Write   int64 `json:"write"`
	Status  int64 `json:"status"`
	Timeout int64 `json:"timeout"`
}

type latency struct {
	Min   int64   `json:"min"`
	Max   int64   `json:"max"`
	Mean  float64 `json:"mean"`
	Stdev float64 `json:"stdev"`
	P50   int64   `json:"p50"`
	P90   int64   `json:"p90"`
	P99   int64   `json:"p99"`
}

type rates struct {
	Send     float64 `json:"send"`
	Receive  float64 `json:"receive"`
	Combined float64 `json:"combined"`
	Clients  int     `json:"clients"`
	Messages int     `json:"messages"`
}

type result struct {
	Requests   int64       `json:"requests"`
	DurationUs int64       `json:"duration_us"`
	Bytes      int64       `json:"bytes"`
	Errors     errorCounts `json:"errors"`
	LatencyUs  latency     `json:"latency_us"`
	// The figure the suite reports (broadcast: combined; echo: absent, the
	// suite divides requests by duration).
	Rps       float64 `json:"rps,omitempty"`
	Broadcast *rates  `json:"broadcast,omitempty"`
}

func summarize(samples []time.Duration) latency {
	if len(samples) == 0 {
		return latency{}
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	var sum float64
	for _, s := range samples {
		sum += float64(s.Microseconds())
	}
	mean := sum / float64(len(samples))
	var sq float64
	for _, s := range samples {
		d := float64(s.Microseconds()) - mean
		sq += d * d
	}
	pct := func(p float64) int64 {
		i := int(float64(len(samples)) * p / 100)
		if i >= len(samples) {
			i = len(samples) - 1
		}
		return samples[i].Microseconds()
	}
	return latency{
		Min: samples[0].Microseconds(), Max: samples[len(samples)-1].Microseconds(),
		Mean: mean, Stdev: math.Sqrt(sq / float64(len(samples))),
		P50: pct(50), P90: pct(90), P99: pct(99),
	}
}

func openAll(target *url.URL, n int, errs *errorCounts) []*conn {
	conns := make([]*conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := dial(target)
		if err != nil {
			errs.Connect++
			continue
		}
		conns = append(conns, c)
	}
	return conns
}

func echo(target *url.URL, connections int, duration time.Duration) result {
	var res result
	conns := openAll(target, connections, &res.Errors)
	frame := clientFrame(opBinary, message)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		samples  []time.Duration
		messages atomic.Int64
		bad      atomic.Int64
		readErr  atomic.Int64
	)
	start := time.Now()
	deadline := start.Add(duration)
	for _, c := range conns {
		wg.Add(1)
		go func(c *conn) {
			defer wg.Done()
			own := make([]time.Duration, 0, 4096)
			buf := make([]byte, 256)
			for time.Now().Before(deadline) {
				sent := time.Now()
				if err := c.send(frame, true); err != nil {
					readErr.Add(1)
					break
				}
				c.SetReadDeadline(deadline.Add(4 * time.Second))
				data, err := c.receive(buf)
				if err != nil {
					readErr.Add(1)
					break
				}
				own = append(own, time.Since(sent))
				if string(data) == string(message) {
					messages.Add(1)
				} else {
					bad.Add(1)
				}
			}
			mu.Lock()
			samples = append(samples, own...)
			mu.Unlock()
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, c := range conns {
		c.close()
	}
	res.Requests = messages.Load()
	res.DurationUs = elapsed.Microseconds()
	res.Bytes = res.Requests * int64(len(message))
	res.Errors.Status += bad.Load()
	res.Errors.Read += readErr.Load()
	res.LatencyUs = summarize(samples)
	return res
}

// broadcast runs Granian's measure; a server that has not delivered
// everything by `limit` is measured on what it delivered (slow, not wrong),
// unless its deliveries had stopped, which counts the missing as lost.
func broadcast(target *url.URL, clients, perClient int, limit time.Duration) result {
	var res result
	conns := openAll(target, clients, &res.Errors)
	if len(conns) == 0 {
		return res
	}
	// Let the server register every client before the first message.
	time.Sleep(200 * time.Millisecond)
	n := len(conns)
	want := perClient * n
	type clientTimes struct {
		send, recv time.Duration
		sent, got  int
	}
	times := make([]clientTimes, n)
	var (
		wg         sync.WaitGroup
		last       atomic.Int64 // unix ns of the latest delivery
		bad        atomic.Int64
		readErr    atomic.Int64
		writeErr   atomic.Int64
		unfinished atomic.Int64
	)
	start := time.Now()
	deadline := start.Add(limit)
	frame := clientFrame(opBinary, message)
	for i, c := range conns {
		wg.Add(2)
		go func(i int, c *conn) {
			defer wg.Done()
			t0 := time.Now()
			sent := 0
			for ; sent < perClient && time.Now().Before(deadline); sent++ {
				// Flushed in batches of 16: a client that sends as fast as it
				// can, without a system call per 70 B frame.
				if err := c.send(frame, sent%16 == 15); err != nil {
					writeErr.Add(1)
					break
				}
			}
			if err := c.flush(); err != nil {
				writeErr.Add(1)
			}
			times[i].send, times[i].sent = time.Since(t0), sent
		}(i, c)
		go func(i int, c *conn) {
			defer wg.Done()
			t0 := time.Now()
			buf := make([]byte, 256)
			got := 0
			c.SetReadDeadline(deadline)
			for got < want {
				data, err := c.receive(buf)
				if err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						unfinished.Add(1)
					} else {
						readErr.Add(1)
					}
					break
				}
				if string(data) != string(message) {
					bad.Add(1)
				}
				got++
				last.Store(time.Now().UnixNano())
			}
			times[i].recv, times[i].got = time.Since(t0), got
		}(i, c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, c := range conns {
		c.close()
	}
	r := &rates{Clients: n, Messages: perClient}
	var sent, got int
	for _, t := range times {
		if t.send > 0 {
			r.Send += float64(t.sent) / t.send.Seconds()
		}
		if t.recv > 0 {
			r.Receive += float64(t.got) / t.recv.Seconds()
		}
		longer := t.send
		if t.recv > longer {
			longer = t.recv
		}
		if longer > 0 {
			r.Combined += float64(t.sent+t.got) / longer.Seconds()
		}
		sent += t.sent
		got += t.got
	}
	if unfinished.Load() > 0 {
		// Still arriving at the limit: slow. Quiet for a second before it: lost.
		if time.Unix(0, last.Load()).Before(deadline.Add(-time.Second)) {
			res.Errors.Timeout += int64(sent*n - got)
		}
	}
	res.Requests = int64(sent + got)
	res.DurationUs = elapsed.Microseconds()
	res.Bytes = res.Requests * int64(len(message))
	res.Errors.Status += bad.Load()
	res.Errors.Read += readErr.Load()
	res.Errors.Write += writeErr.Load()
	res.Rps = r.Combined
	res.Broadcast = r
	return res
}

func verify(target *url.URL) string {
	c, err := dial(target)
	if err != nil {
		return err.Error()
	}
	defer c.close()
	if err := c.send(clientFrame(opBinary, message), true); err != nil {
		return err.Error()
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	data, err := c.receive(nil)
	if err != nil {
		return err.Error()
	}
	if string(data) != string(message) {
		return fmt.Sprintf("returned %q, expected the 64 B message", data)
	}
	return ""
}

func main() {
	rawURL := flag.String("url", "", "ws://host:port/path")
	connections := flag.Int("connections", 64, "connections (broadcast: clients)")
	duration := flag.Float64("duration", 5, "echo: seconds of load; broadcast: a quarter of the time limit")
	mode := flag.String("mode", "echo", "echo | broadcast")
	messages := flag.Int("messages", 2500, "broadcast: messages each client sends")
	check := flag.Bool("verify", false, "one message's round trip; exit 0 if intact")
	flag.Parse()
	target, err := url.Parse(*rawURL)
	if err != nil || target.Host == "" {
		fmt.Fprintln(os.Stderr, "wsload: -url ws://host:port/path is required")
		os.Exit(2)
	}
	if *check {
		if problem := verify(target); problem != "" {
			fmt.Println(problem)
			os.Exit(1)
		}
		fmt.Println("ok")
		return
	}
	seconds := time.Duration(*duration * float64(time.Second))
	var res result
	switch *mode {
	case "echo":
		res = echo(target, *connections, seconds)
	case "broadcast":
		res = broadcast(target, *connections, *messages, 4*seconds)
	default:
		fmt.Fprintln(os.Stderr, "wsload: -mode echo|broadcast")
		os.Exit(2)
	}
	out, _ := json.Marshal(res)
	fmt.Println("BENCH_JSON " + string(out))
}
