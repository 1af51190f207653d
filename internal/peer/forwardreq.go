package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// forwardRequest sends a call as a request of its own (the path a call
// takes when its line would be too long for the call stream): POST path,
// the argument as the body, answered with the signed reply.
func (c *Client) forwardRequest(ctx context.Context, addr, path string, left time.Duration, arg []byte) (Reply, *Error) {
	defer c.closeIdleIfClosed() // a call that was in flight at Close hangs up after it
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(addr, path), bytes.NewReader(arg))
	if err != nil {
		return Reply{}, &Error{Kind: KindBadRequest, Message: "bad peer address: " + err.Error(), cause: err}
	}
	ts, timeout := strconv.FormatInt(c.cfg.Now().UnixMilli(), 10), left.String()
	req.Header = http.Header{
		"Content-Type": {"application/json"},
		headerTime:     {ts},
		headerTimeout:  {timeout},
	}
	tc := injectTrace(ctx, req.Header)
	digest := bodyDigest(arg)
	req.Header[headerBodyDigest] = []string{digest}
	sig := c.signer.signForward(http.MethodPost, req.URL.RequestURI(), ts, timeout, tc, digest)
	req.Header[headerSignature] = []string{sig}

	resp, err := c.hc.Do(req)
	if err != nil {
		return Reply{}, transportError(ctx, err)
	}
	defer resp.Body.Close()
	body, err := readAll(resp.Body, resp.ContentLength, c.cfg.MaxBodyBytes, "reply")
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			e = transportError(ctx, err)
		}
		e.OutcomeUnknown = true
		return Reply{}, e
	}
	if !equal(resp.Header.Get(headerSignature), c.signer.signReply(sig, resp.StatusCode, body)) {
		if resp.StatusCode == http.StatusUnauthorized { // refused before running
			return Reply{}, decodeWireError(resp.StatusCode, body)
		}
		return Reply{}, &Error{Kind: KindUnauthorized, OutcomeUnknown: true,
			Message: fmt.Sprintf("HTTP %d without a valid signature: not a peer of this cluster", resp.StatusCode)}
	}
	if resp.StatusCode != http.StatusOK {
		return Reply{}, decodeWireError(resp.StatusCode, body)
	}
	return Reply{Value: body}, nil
}
