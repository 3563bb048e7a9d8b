package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// tally: one worker's counts, summed into the result at the end.
type tally struct {
	requests int64
	bytes    int64
	errors   errorCounts
	codes    map[int]int64
	samples  []time.Duration
}

func (t *tally) add(o *tally) {
	t.requests += o.requests
	t.bytes += o.bytes
	t.errors.Connect += o.errors.Connect
	t.errors.Read += o.errors.Read
	t.errors.Write += o.errors.Write
	t.errors.Status += o.errors.Status
	t.errors.Timeout += o.errors.Timeout
	for code, n := range o.codes {
		t.codes[code] += n
	}
	t.samples = append(t.samples, o.samples...)
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// once: one request on tr, its body read to the end, counted in t.
func once(cfg *config, tr *http3.Transport, header http.Header, buf []byte, t *tally) error {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	sent := time.Now()
	resp, err := tr.RoundTrip(cfg.request(ctx, header))
	if err != nil {
		if isTimeout(err) {
			t.errors.Timeout++
		} else {
			t.errors.Write++
		}
		return err
	}
	var n int64
	for {
		k, err := resp.Body.Read(buf)
		n += int64(k)
		if err != nil {
			resp.Body.Close()
			t.bytes += n
			if errors.Is(err, io.EOF) {
				break
			}
			if isTimeout(err) {
				t.errors.Timeout++
			} else {
				t.errors.Read++
			}
			return err
		}
	}
	t.samples = append(t.samples, time.Since(sent))
	t.requests++
	t.codes[resp.StatusCode]++
	if resp.StatusCode/100 != 2 {
		t.errors.Status++
	}
	return nil
}

// open: every connection's first request, not counted; the connections it
// failed on are closed and left out.
func open(cfg *config, n int) ([]*http3.Transport, int64) {
	all := make([]*http3.Transport, n)
	ok := make([]bool, n)
	var wg sync.WaitGroup
	for i := range all {
		all[i] = cfg.transport()
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			scratch := tally{codes: map[int]int64{}}
			ok[i] = once(cfg, all[i], cfg.header(), make([]byte, 16<<10), &scratch) == nil
		}(i)
	}
	wg.Wait()
	opened := make([]*http3.Transport, 0, n)
	var failed int64
	for i, tr := range all {
		if ok[i] {
			opened = append(opened, tr)
		} else {
			tr.Close()
			failed++
		}
	}
	return opened, failed
}

// phase: `streams` workers on every transport, each sending one request after
// another until `length` is over; returns the counts and the time from the
// start to the last response.
func phase(cfg *config, transports []*http3.Transport, streams int, length time.Duration) (tally, time.Duration) {
	total := tally{codes: map[int]int64{}}
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	start := time.Now()
	deadline := start.Add(length)
	for _, tr := range transports {
		for s := 0; s < streams; s++ {
			wg.Add(1)
			go func(tr *http3.Transport) {
				defer wg.Done()
				own := tally{codes: map[int]int64{}, samples: make([]time.Duration, 0, 4096)}
				header := cfg.header()
				buf := make([]byte, 16<<10)
				for time.Now().Before(deadline) {
					if err := once(cfg, tr, header, buf, &own); err != nil {
						// A failed connection is redialled by the transport on
						// the next request; no spinning against a server that is
						// gone.
						time.Sleep(10 * time.Millisecond)
					}
				}
				mu.Lock()
				total.add(&own)
				mu.Unlock()
			}(tr)
		}
	}
	wg.Wait()
	return total, time.Since(start)
}

func run(cfg *config, connections, streams int, warmup, length time.Duration) result {
	transports, failed := open(cfg, connections)
	defer func() {
		for _, tr := range transports {
			tr.Close()
		}
	}()
	res := result{Connections: len(transports), Streams: streams, StatusCodes: map[string]int64{}}
	res.Errors.Connect = failed
	if len(transports) == 0 {
		return res
	}
	if warmup > 0 {
		phase(cfg, transports, streams, warmup)
	}
	t, elapsed := phase(cfg, transports, streams, length)
	res.Requests = t.requests
	res.DurationUs = elapsed.Microseconds()
	res.Bytes = t.bytes
	t.errors.Connect += failed
	res.Errors = t.errors
	res.LatencyUs = summarize(t.samples)
	if elapsed > 0 {
		res.Rps = float64(t.requests) / elapsed.Seconds()
	}
	for code, n := range t.codes {
		res.StatusCodes[strconv.Itoa(code)] = n
	}
	return res
}
