package api

import (
	"bytes"
	"net/http"
)

// keptHeaders are the response headers an idempotent answer is kept with
// and replayed with; the rest (the request id, Date) belong to each
// response.
var keptHeaders = []string{"Content-Type", "Location", "Retry-After"}

// answerRecorder is the ResponseWriter an idempotent request's handler
// writes to: the answer is kept before the client gets it, so that a
// client that saw it can count on a retry finding it.
type answerRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newAnswerRecorder() *answerRecorder { return &answerRecorder{header: http.Header{}} }

func (a *answerRecorder) Header() http.Header { return a.header }

func (a *answerRecorder) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *answerRecorder) Write(b []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	return a.body.Write(b)
}

// answer is what was written, as kept.
func (a *answerRecorder) answer() StoredAnswer {
	kept := http.Header{}
	for _, name := range keptHeaders {
		if v := a.header.Values(name); len(v) > 0 {
			kept[name] = v
		}
	}
	return StoredAnswer{Status: max(a.status, http.StatusOK), Header: kept, Body: a.body.Bytes()}
}

// writeTo sends what was written to w.
func (a *answerRecorder) writeTo(w http.ResponseWriter) {
	h := w.Header()
	for name, values := range a.header {
		h[name] = values
	}
	w.WriteHeader(max(a.status, http.StatusOK))
	_, _ = w.Write(a.body.Bytes())
}
