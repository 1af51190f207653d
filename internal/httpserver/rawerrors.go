package httpserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/trellis-go/trellis/api"
)

// ProblemResponses wraps ln so that the errors net/http answers by itself,
// before any handler runs, are problem+json like every other error: a
// request line or header it cannot parse (a malformed path escape such as
// /orders/%ZZ, a missing Host), headers or a request line over
// MaxHeaderBytes (431), an unsupported transfer coding (501). net/http
// writes those as fixed text/plain responses straight to the connection
// (see conn.serve in net/http/server.go), with no hook; this wrapper
// recognises them there, in the one Write that carries each, and sends
// the same status as an RFC 9457 problem instead. A handler's response is
// never taken for one: net/http gives those a Date header, which the
// fixed responses lack.
func ProblemResponses(ln net.Listener) net.Listener { return problemListener{ln} }

type problemListener struct{ net.Listener }

func (l problemListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return problemConn{c}, nil
}

// problemConn rewrites net/http's fixed error responses; see
// ProblemResponses.
type problemConn struct{ net.Conn }

func (c problemConn) Write(b []byte) (int, error) {
	status, text, ok := parseRawError(b)
	if !ok {
		return c.Conn.Write(b)
	}
	if _, err := c.Conn.Write(rawProblem(status, text)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// rawErrorHeaders end the status line of net/http's fixed error responses.
const rawErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// parseRawError recognises one of net/http's fixed error responses,
// "HTTP/1.1 <status> <text>" + rawErrorHeaders + <body>, and returns its
// status and what its body says beyond the status ("" when nothing).
func parseRawError(b []byte) (status int, text string, ok bool) {
	const proto = "HTTP/1.1 "
	end := bytes.Index(b, []byte(rawErrorHeaders))
	if !bytes.HasPrefix(b, []byte(proto)) || end < len(proto)+3 || bytes.Contains(b[:end], []byte("\r\n")) {
		return 0, "", false
	}
	status, err := strconv.Atoi(string(b[len(proto) : len(proto)+3]))
	if err != nil || status < 400 || status > 599 {
		return 0, "", false
	}
	body := string(b[end+len(rawErrorHeaders):])
	// The body is "<status> <status text>", then ": <reason>" if any.
	prefix := strconv.Itoa(status) + " " + http.StatusText(status)
	if len(body) > len(prefix)+2 && body[:len(prefix)] == prefix {
		text = body[len(prefix)+2:]
	} else if body != prefix {
		text = body
	}
	return status, text, true
}

// rawProblem is the response that replaces net/http's fixed one: the same
// status, as a problem. There is no request (it did not parse), so no
// instance or request id.
func rawProblem(status int, text string) []byte {
	detail := rawDetails[status]
	if text != "" {
		detail += ": " + text
	}
	body, _ := json.Marshal(api.Problem{Type: api.ProblemTypeBlank, Title: http.StatusText(status), Status: status, Detail: detail})
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
		status, http.StatusText(status), api.ContentTypeProblem, len(body)+1)
	b.Write(body)
	b.WriteByte('\n')
	return b.Bytes()
}

// rawDetails say what each of net/http's own refusals means.
var rawDetails = map[int]string{
	http.StatusBadRequest: "the request could not be parsed (its request line, a malformed escape in its path, " +
		"or a header is invalid)",
	http.StatusRequestHeaderFieldsTooLarge: "the request line and headers are larger than the server accepts",
	http.StatusNotImplemented:              "the request's transfer coding is not supported",
	http.StatusHTTPVersionNotSupported:     "the request's HTTP version is not supported",
}
