package main

import (
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// echo: every connection sends the message and waits for it back until
// the duration is over; one round trip is one message.
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
