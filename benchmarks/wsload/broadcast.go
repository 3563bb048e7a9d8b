package main

import (
	"errors"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

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
