package trellis_test

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// loadClient is the HTTP benchmarks' load generator: each client
// goroutine keeps one HTTP/1.1 keep-alive connection per server, writes
// its requests straight onto it and reads each response with net/http's
// own parser. net/http's Client runs two goroutines per connection and
// hands every request between them and the caller; in a benchmark whose
// servers share the process and the machine's cores with the clients,
// that hand-off work is counted against both servers alike and pulls
// every ratio towards 1. The servers see ordinary keep-alive traffic.
// With -bench.stdclient the requests go through a net/http Client
// instead, for a comparison with figures measured that way.
type loadClient struct {
	mu    sync.Mutex
	conns map[connKey]*loadConn
	std   *http.Client // with -bench.stdclient
}

var stdClient = flag.Bool("bench.stdclient", false, "send the HTTP benchmarks' requests through a net/http Client")

type connKey struct {
	worker int
	host   string
}

type loadConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func newLoadClient() *loadClient {
	lc := &loadClient{conns: map[connKey]*loadConn{}}
	if *stdClient {
		lc.std = &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 64}}
	}
	return lc
}

// Close closes every connection.
func (lc *loadClient) Close() {
	if lc.std != nil {
		lc.std.CloseIdleConnections()
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for k, c := range lc.conns {
		_ = c.c.Close()
		delete(lc.conns, k)
	}
}

// conn is worker's connection to host, dialled on first use. Each worker
// is one goroutine, so a connection is never used by two at once.
func (lc *loadClient) conn(worker int, host string) (*loadConn, error) {
	k := connKey{worker, host}
	lc.mu.Lock()
	c := lc.conns[k]
	lc.mu.Unlock()
	if c != nil {
		return c, nil
	}
	nc, err := net.Dial("tcp", host)
	if err != nil {
		return nil, err
	}
	c = &loadConn{c: nc, r: bufio.NewReader(nc), w: bufio.NewWriter(nc)}
	lc.mu.Lock()
	lc.conns[k] = c
	lc.mu.Unlock()
	return c, nil
}

func (lc *loadClient) drop(worker int, host string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if c := lc.conns[connKey{worker, host}]; c != nil {
		_ = c.c.Close()
		delete(lc.conns, connKey{worker, host})
	}
}

// do sends method rawURL with body (JSON when not empty) on worker's
// connection and reads the whole response; any status but 200 is an
// error.
func (lc *loadClient) do(worker int, method, rawURL, body string) error {
	if lc.std != nil {
		return lc.doStd(method, rawURL, body)
	}
	// The benchmarks' URLs are http://host:port/path: split, not parsed,
	// on every request.
	rest, ok := strings.CutPrefix(rawURL, "http://")
	if !ok {
		return fmt.Errorf("load client: %q is not an http:// URL", rawURL)
	}
	host, path, _ := strings.Cut(rest, "/")
	path = "/" + path
	c, err := lc.conn(worker, host)
	if err != nil {
		return err
	}
	var req strings.Builder
	req.Grow(128 + len(body))
	req.WriteString(method + " " + path + " HTTP/1.1\r\nHost: " + host + "\r\n")
	if body != "" {
		req.WriteString("Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	req.WriteString("\r\n" + body)
	if _, err := c.w.WriteString(req.String()); err != nil {
		lc.drop(worker, host)
		return err
	}
	if err := c.w.Flush(); err != nil {
		lc.drop(worker, host)
		return err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		lc.drop(worker, host)
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.Close {
		lc.drop(worker, host)
	}
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: status %d", method, rawURL, resp.StatusCode)
	}
	return err
}

// doStd is do through the net/http Client.
func (lc *loadClient) doStd(method, rawURL, body string) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, rawURL, rd)
	if err != nil {
		return err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := lc.std.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: status %d", method, rawURL, resp.StatusCode)
	}
	return err
}
