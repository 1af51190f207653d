package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// ContentTypeJSON is the media type of JSON request and response bodies.
const ContentTypeJSON = "application/json"

// WriteJSON answers with status and v as JSON. v is encoded before anything
// is written, so a value that cannot be encoded becomes a 500 problem (and a
// log line) instead of half a response.
func WriteJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteError(w, r, fmt.Errorf("encode the %T response: %w", v, err))
		return
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", ContentTypeJSON)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
