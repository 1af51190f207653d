package httpserver

import (
	"net/http"
	"testing"
)

// TestParseRawError recognises net/http's fixed error responses, and
// nothing else: a handler's response has a Date header.
func TestParseRawError(t *testing.T) {
	tests := []struct {
		name   string
		b      string
		status int
		text   string
		ok     bool
	}{
		{"bad request", "HTTP/1.1 400 Bad Request" + rawErrorHeaders + "400 Bad Request", 400, "", true},
		{"with a reason", "HTTP/1.1 400 Bad Request: missing required Host header" + rawErrorHeaders +
			"400 Bad Request: missing required Host header", 400, "missing required Host header", true},
		{"too large", "HTTP/1.1 431 Request Header Fields Too Large" + rawErrorHeaders + "431 Request Header Fields Too Large", 431, "", true},
		{"not implemented", "HTTP/1.1 501 Not Implemented" + rawErrorHeaders + "Unsupported transfer encoding", 501, "Unsupported transfer encoding", true},
		{"a handler's response", "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nDate: Mon, 01 Jan 2026 00:00:00 GMT" +
			"\r\nConnection: close\r\n\r\nno", 0, "", false},
		{"a success", "HTTP/1.1 200 OK" + rawErrorHeaders + "fine", 0, "", false},
		{"a body chunk", "400 Bad Request", 0, "", false},
	}
	for _, tt := range tests {
		status, text, ok := parseRawError([]byte(tt.b))
		if status != tt.status || text != tt.text || ok != tt.ok {
			t.Errorf("%s: %d %q %v; want %d %q %v", tt.name, status, text, ok, tt.status, tt.text, tt.ok)
		}
	}
	if p := string(rawProblem(http.StatusBadRequest, "")); len(p) == 0 {
		t.Fatal("no problem")
	}
}
