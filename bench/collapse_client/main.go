// Command collapse_client measures collapsed forwarding from the client's
// side: it opens every connection first (untimed), then sends one GET on each
// as close together as it can, and reports when each request left, when its
// response began and when its last byte arrived (the kernel's receive
// timestamps), as wall-clock nanoseconds, so they line up with an origin's and
// a server's own timestamps. The timed window runs from the first request
// sent to the last response completed.
//
//	collapse_client -addr 127.0.0.1:8080 -path /slow/x -n 500 > result.json
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// client is one connection's request and what came back on it.
type client struct {
	Sent  int64 `json:"sent"`
	First int64 `json:"first"`
	Done  int64 `json:"done"`
	// When this process read the first and the last bytes.
	ReadFirst int64  `json:"read_first"`
	ReadDone  int64  `json:"read_done"`
	Status    int    `json:"status"`
	Bytes     int64  `json:"bytes"`
	Err       string `json:"err,omitempty"`
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
	// The last response as this process read it, and the window so.
	LastRead    int64   `json:"last_read"`
	ReadWindowS float64 `json:"read_window_s"`
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
			if err := readResponse(conns[i], c); err != nil {
				c.Err = err.Error()
			}
		}(i)
	}
	time.Sleep(*settle)
	// One goroutine writes every request back to back: a write is a few
	// microseconds, so the last leaves about n of them after the first.
	for i, conn := range conns {
		clients[i].Sent = time.Now().UnixNano()
		if _, err := conn.Write(request); err != nil {
			clients[i].Err = err.Error()
		}
	}
	wg.Wait()
	// Connections close only once every answer is in, so a server does not
	// spend the window on the closes of clients already served.
	for _, conn := range conns {
		conn.Close()
	}

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
		if c.ReadDone > r.LastRead {
			r.LastRead = c.ReadDone
		}
		if fb := float64(c.First-r.FirstSent) / 1e9; r.FirstByteMinS == 0 || fb < r.FirstByteMinS {
			r.FirstByteMinS = fb
		}
	}
	r.WindowS = float64(r.LastDone-r.FirstSent) / 1e9
	r.ReadWindowS = float64(r.LastRead-r.FirstSent) / 1e9
	r.SendSpreadS = float64(r.LastSent-r.FirstSent) / 1e9
	r.DoneSpreadS = float64(r.LastDone-r.FirstDone) / 1e9
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(&r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// readResponse reads one HTTP/1.1 response with recvmsg and SO_TIMESTAMPNS,
// so First and Done are when the kernel received the first and the last
// bytes, not when this process got round to reading them: with hundreds of
// answers arriving at once, the client's own scheduling would otherwise be
// counted as the server's. ReadFirst and ReadDone are the user-space times.
func readResponse(conn net.Conn, c *client) error {
	tcp, ok := conn.(*net.TCPConn)
	if !ok {
		return errors.New("not a TCP connection")
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return fmt.Errorf("SO_TIMESTAMPNS: %v %v", err, serr)
	}
	buf := make([]byte, 0, 4096)
	chunk := make([]byte, 16<<10)
	oob := make([]byte, 128)
	for {
		var n, oobn int
		var rerr error
		err := raw.Read(func(fd uintptr) bool {
			n, oobn, _, _, rerr = syscall.Recvmsg(int(fd), chunk, oob, 0)
			return rerr != syscall.EAGAIN
		})
		if err == nil {
			err = rerr
		}
		now := time.Now().UnixNano()
		if err != nil {
			return err
		}
		stamp := now
		if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SO_TIMESTAMPNS && len(m.Data) >= 16 {
					sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
					nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
					stamp = sec*1e9 + nsec
				}
			}
		}
		if c.First == 0 && n > 0 {
			c.First, c.ReadFirst = stamp, now
		}
		buf = append(buf, chunk[:n]...)
		done, err := complete(buf, n == 0, c)
		if err != nil {
			return err
		}
		if done {
			c.Done, c.ReadDone = stamp, now
			return nil
		}
		if n == 0 {
			return errors.New("closed before the response ended")
		}
	}
}

// complete says whether buf holds a whole response: its head, then a body
// framed by Content-Length, chunked coding, or the end of the connection
// (eof). It fills in the status and the body bytes once it knows them.
func complete(buf []byte, eof bool, c *client) (bool, error) {
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		return false, nil
	}
	lines := strings.Split(string(buf[:end]), "\r\n")
	parts := strings.SplitN(lines[0], " ", 3)
	if len(parts) < 2 {
		return false, fmt.Errorf("bad status line %q", lines[0])
	}
	status, err := strconv.Atoi(parts[1])
	if err != nil {
		return false, fmt.Errorf("bad status line %q", lines[0])
	}
	c.Status = status
	length, chunked := int64(-1), false
	for _, h := range lines[1:] {
		name, value, _ := strings.Cut(h, ":")
		value = strings.TrimSpace(value)
		switch strings.ToLower(name) {
		case "content-length":
			if length, err = strconv.ParseInt(value, 10, 64); err != nil {
				return false, fmt.Errorf("bad Content-Length %q", value)
			}
		case "transfer-encoding":
			chunked = strings.Contains(strings.ToLower(value), "chunked")
		}
	}
	body := buf[end+4:]
	switch {
	case chunked:
		var got int64
		for {
			eol := bytes.Index(body, []byte("\r\n"))
			if eol < 0 {
				return false, nil
			}
			size, _, _ := strings.Cut(string(body[:eol]), ";")
			n, err := strconv.ParseInt(strings.TrimSpace(size), 16, 64)
			if err != nil {
				return false, fmt.Errorf("bad chunk size %q", size)
			}
			body = body[eol+2:]
			if n == 0 {
				// No trailers are expected: the blank line ends it.
				if !bytes.HasPrefix(body, []byte("\r\n")) {
					return false, nil
				}
				c.Bytes = got
				return true, nil
			}
			if int64(len(body)) < n+2 {
				return false, nil
			}
			got += n
			body = body[n+2:]
		}
	case length >= 0:
		c.Bytes = int64(len(body))
		return c.Bytes >= length, nil
	default:
		c.Bytes = int64(len(body))
		return eof, nil
	}
}
