// h3load: the suite's HTTP/3 load generator (wrk speaks HTTP/1.1, h2load's
// HTTP/3 needs an nghttp2 built with ngtcp2, which distributions rarely ship).
// quic-go's http3 client; the one dependency is pinned in go.mod and go.sum.
//
//	h3load -url https://127.0.0.1:8443/ -c 16 -d 5
//	h3load -url https://127.0.0.1:8443/echo -c 16 -m 4 -d 5 -method POST -body-size 10240
//	h3load -url https://127.0.0.1:8443/ -verify [-o body.bin]
//
// -c QUIC connections, each its own http3.Transport (its own UDP socket), so
// N connections are N QUIC connections; -m requests in flight on each (one
// stream each), so -c x -m requests are in flight at once. Every connection
// is opened, with one request that is not counted, before the clock starts;
// a connection that cannot be opened counts as a connect error and is left
// out. Then -warmup seconds of load that are not counted, then -d seconds
// that are. Every response body is read to the end.
//
// Prints one line, "BENCH_JSON {...}", shaped like the suite's wrk script
// (benchmarks/lua/report.lua) and wsload, so benchmarks/bench/loadgen.py's
// _from_json reads it:
//
//	requests     responses received in full, whatever their status (as wrk)
//	duration_us  from the first request to the last response (in-flight
//	             requests at -d are waited for, up to -timeout)
//	bytes        response body bytes (HTTP/3 headers are QPACK-compressed
//	             and not counted; wrk counts the whole HTTP/1.1 response)
//	errors       connect: connections not opened; write: requests that got
//	             no response (stream or connection failed before the
//	             headers); read: responses whose body failed midway;
//	             timeout: requests over -timeout; status: responses that
//	             were not 2xx
//	latency_us   request sent to body read, every response (non-2xx too)
//	rps          requests / duration
//
// plus, for people: connections (opened), streams (-m), status_codes.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/quic-go/quic-go/http3"
)

// The same bytes the apps serve and wrk posts (benchmarks/apps/payload.py).
const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"

func pattern(size int) []byte {
	return bytes.Repeat([]byte(alphabet), size/len(alphabet)+1)[:size]
}

type config struct {
	target   *url.URL
	method   string
	body     []byte // nil: no body
	timeout  time.Duration
	insecure bool
}

func (cfg *config) transport() *http3.Transport {
	return &http3.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: cfg.insecure},
		// wrk and h2load ask for no compression: neither do we.
		DisableCompression: true,
	}
}

// request: a fresh one each time (a request's body is read once); the URL
// and header are shared and only read.
func (cfg *config) request(ctx context.Context, header http.Header) *http.Request {
	req := &http.Request{
		Method: cfg.method,
		URL:    cfg.target,
		Host:   cfg.target.Host,
		Header: header,
		Proto:  "HTTP/3", ProtoMajor: 3,
	}
	if cfg.body != nil {
		body := cfg.body
		req.ContentLength = int64(len(body))
		req.Body = io.NopCloser(bytes.NewReader(body))
		// Lets the transport retry a request the server refused unread.
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return req.WithContext(ctx)
}

func (cfg *config) header() http.Header {
	h := http.Header{"User-Agent": {"h3load"}}
	if cfg.body != nil {
		h.Set("Content-Type", "application/octet-stream")
	}
	return h
}

// verify: one request on a fresh connection; "" when it came back 2xx. With
// out set, the body is written there, for the caller to check byte for byte.
func verify(cfg *config, out string) string {
	tr := cfg.transport()
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	resp, err := tr.RoundTrip(cfg.request(ctx, cfg.header()))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err.Error()
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Sprintf("status %d, %d B body", resp.StatusCode, len(data))
	}
	if out != "" {
		if err := os.WriteFile(out, data, 0o644); err != nil {
			return err.Error()
		}
	}
	return ""
}

func main() {
	rawURL := flag.String("url", "", "https://host:port/path")
	connections := flag.Int("c", 16, "QUIC connections")
	streams := flag.Int("m", 1, "requests in flight on each connection")
	duration := flag.Float64("d", 5, "seconds of load that are counted")
	warmup := flag.Float64("warmup", 0, "seconds of load before -d, not counted")
	method := flag.String("method", "GET", "GET | POST")
	bodySize := flag.Int("body-size", 0, "POST: request body bytes")
	insecure := flag.Bool("insecure", true, "skip certificate verification (-insecure=false to verify)")
	timeout := flag.Duration("timeout", 4*time.Second, "a request slower than this is a timeout error")
	check := flag.Bool("verify", false, "one request; exit 0 if it came back 2xx")
	bodyOut := flag.String("o", "", "with -verify: write the response body to this file")
	flag.Parse()
	target, err := url.Parse(*rawURL)
	if err != nil || target.Scheme != "https" || target.Host == "" {
		fmt.Fprintln(os.Stderr, "h3load: -url https://host:port/path is required")
		os.Exit(2)
	}
	if target.Path == "" {
		target.Path = "/"
	}
	cfg := &config{target: target, method: strings.ToUpper(*method), timeout: *timeout, insecure: *insecure}
	switch cfg.method {
	case "GET":
	case "POST":
		cfg.body = pattern(*bodySize)
	default:
		fmt.Fprintln(os.Stderr, "h3load: -method GET|POST")
		os.Exit(2)
	}
	if *connections < 1 || *streams < 1 || *duration <= 0 || *warmup < 0 || *timeout <= 0 || *bodySize < 0 {
		fmt.Fprintln(os.Stderr, "h3load: -c, -m, -d, -timeout must be positive; -warmup, -body-size not negative")
		os.Exit(2)
	}
	if *check {
		if problem := verify(cfg, *bodyOut); problem != "" {
			fmt.Println(problem)
			os.Exit(1)
		}
		fmt.Println("ok")
		return
	}
	seconds := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	res := run(cfg, *connections, *streams, seconds(*warmup), seconds(*duration))
	out, _ := json.Marshal(res)
	fmt.Println("BENCH_JSON " + string(out))
}
