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
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"
)

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
