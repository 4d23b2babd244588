// Command collapse_client measures collapsed forwarding from the client's
// side: it opens every connection first (untimed), then sends one GET on each
// as close together as it can, and reports when each request left, when its
// response began and when its last byte arrived, as wall-clock nanoseconds,
// so they line up with an origin's and a server's own timestamps. The timed
// window runs from the first request sent to the last response completed.
//
//	collapse_client -addr 127.0.0.1:8080 -path /slow/x -n 500 > result.json
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// client is one connection's request and what came back on it.
type client struct {
	Sent   int64  `json:"sent"`
	First  int64  `json:"first"`
	Done   int64  `json:"done"`
	Status int    `json:"status"`
	Bytes  int64  `json:"bytes"`
	Err    string `json:"err,omitempty"`
}

// report is the program's output: every client, and the window's ends.
type report struct {
	Clients       []client `json:"clients"`
	ConnectS      float64  `json:"connect_s"`
	FirstSent     int64    `json:"first_sent"`
	LastSent      int64    `json:"last_sent"`
	FirstDone     int64    `json:"first_done"`
	LastDone      int64    `json:"last_done"`
	WindowS       float64  `json:"window_s"`
	Failed        int      `json:"failed"`
	Answered200   int      `json:"answered_200"`
	SendSpreadS   float64  `json:"send_spread_s"`
	DoneSpreadS   float64  `json:"done_spread_s"`
	FirstByteMinS float64  `json:"first_byte_min_s"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "server address")
	path := flag.String("path", "/", "request path")
	n := flag.Int("n", 500, "clients (connections, one request each)")
	settle := flag.Duration("settle", 300*time.Millisecond, "pause between connecting and sending, for the server to accept every connection")
	timeout := flag.Duration("timeout", 30*time.Second, "give up on a response after this long")
	flag.Parse()

	conns := make([]net.Conn, *n)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, *n)
	// Connect in a few parallel lanes so the listen backlog is not overrun.
	lanes := 16
	for l := 0; l < lanes; l++ {
		wg.Add(1)
		go func(l int) {
			defer wg.Done()
			for i := l; i < *n; i += lanes {
				conns[i], errs[i] = net.DialTimeout("tcp", *addr, 10*time.Second)
			}
		}(l)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			fmt.Fprintf(os.Stderr, "connection %d: %v\n", i, err)
			os.Exit(1)
		}
	}
	connect := time.Since(start)

	// Every reader is parked on its connection before the first request
	// leaves, so the window holds no goroutine start-up.
	request := []byte(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: collapse_client\r\n\r\n", *path))
	clients := make([]client, *n)
	for i := range conns {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := &clients[i]
			conns[i].SetDeadline(time.Now().Add(*settle + *timeout))
			if err := readResponse(bufio.NewReaderSize(conns[i], 16<<10), c); err != nil {
				c.Err = err.Error()
			}
			conns[i].Close()
		}(i)
	}
	time.Sleep(*settle)
	// One goroutine writes every request back to back: a write is a few
	// microseconds, so the last leaves about n of them after the first.
	for i, conn := range conns {
		clients[i].Sent = time.Now().UnixNano()
		if _, err := conn.Write(request); err != nil {
			clients[i].Err = err.Error()
			conn.Close()
		}
	}
	wg.Wait()

	r := report{Clients: clients, ConnectS: connect.Seconds()}
	for i, c := range clients {
		if i == 0 || c.Sent < r.FirstSent {
			r.FirstSent = c.Sent
		}
		if c.Sent > r.LastSent {
			r.LastSent = c.Sent
		}
		if c.Err != "" {
			r.Failed++
			continue
		}
		if c.Status == 200 {
			r.Answered200++
		}
		if r.FirstDone == 0 || c.Done < r.FirstDone {
			r.FirstDone = c.Done
		}
		if c.Done > r.LastDone {
			r.LastDone = c.Done
		}
		if fb := float64(c.First-r.FirstSent) / 1e9; r.FirstByteMinS == 0 || fb < r.FirstByteMinS {
			r.FirstByteMinS = fb
		}
	}
	r.WindowS = float64(r.LastDone-r.FirstSent) / 1e9
	r.SendSpreadS = float64(r.LastSent-r.FirstSent) / 1e9
	r.DoneSpreadS = float64(r.LastDone-r.FirstDone) / 1e9
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(&r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// readResponse reads one HTTP/1.1 response: the head, then a body framed by
// Content-Length, chunked coding, or the end of the connection.
func readResponse(br *bufio.Reader, c *client) error {
	line, err := br.ReadString('\n')
	if err != nil {
		return fmt.Errorf("no status line: %w", err)
	}
	c.First = time.Now().UnixNano()
	parts := strings.SplitN(strings.TrimSpace(line), " ", 3)
	if len(parts) < 2 {
		return fmt.Errorf("bad status line %q", line)
	}
	if c.Status, err = strconv.Atoi(parts[1]); err != nil {
		return fmt.Errorf("bad status line %q", line)
	}
	length, chunked := int64(-1), false
	for {
		h, err := br.ReadString('\n')
		if err != nil {
			return fmt.Errorf("head cut short: %w", err)
		}
		h = strings.TrimRight(h, "\r\n")
		if h == "" {
			break
		}
		name, value, _ := strings.Cut(h, ":")
		value = strings.TrimSpace(value)
		switch strings.ToLower(name) {
		case "content-length":
			if length, err = strconv.ParseInt(value, 10, 64); err != nil {
				return fmt.Errorf("bad Content-Length %q", value)
			}
		case "transfer-encoding":
			chunked = strings.Contains(strings.ToLower(value), "chunked")
		}
	}
	switch {
	case chunked:
		for {
			size, err := br.ReadString('\n')
			if err != nil {
				return fmt.Errorf("chunk size: %w", err)
			}
			size, _, _ = strings.Cut(strings.TrimSpace(size), ";")
			n, err := strconv.ParseInt(size, 16, 64)
			if err != nil {
				return fmt.Errorf("bad chunk size %q", size)
			}
			if n == 0 {
				for {
					t, err := br.ReadString('\n')
					if err != nil {
						return fmt.Errorf("trailer: %w", err)
					}
					if strings.TrimRight(t, "\r\n") == "" {
						break
					}
				}
				break
			}
			got, err := io.CopyN(io.Discard, br, n+2)
			c.Bytes += got - 2
			if err != nil {
				return fmt.Errorf("chunk cut short: %w", err)
			}
		}
	case length >= 0:
		got, err := io.CopyN(io.Discard, br, length)
		c.Bytes = got
		if err != nil {
			return fmt.Errorf("body cut short: %w", err)
		}
	default:
		got, err := io.Copy(io.Discard, br)
		c.Bytes = got
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
	}
	c.Done = time.Now().UnixNano()
	return nil
}
