// The BENCH_JSON record the suite parses, shaped like its wrk script's and
// wsload's (benchmarks/wsload/result.go: a separate module, so copied).

package main

import (
	"math"
	"sort"
	"time"
)

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

type result struct {
	Requests   int64       `json:"requests"`
	DurationUs int64       `json:"duration_us"`
	Bytes      int64       `json:"bytes"`
	Errors     errorCounts `json:"errors"`
	LatencyUs  latency     `json:"latency_us"`
	Rps        float64     `json:"rps"`
	// Beyond wrk's shape: connections opened, requests in flight on each,
	// responses by status.
	Connections int              `json:"connections"`
	Streams     int              `json:"streams"`
	StatusCodes map[string]int64 `json:"status_codes"`
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
