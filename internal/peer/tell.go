package peer

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Tell: one-way messages to actors on a peer, in order.
//
// Each Client has a sender per peer address: a queue and a goroutine that
// writes it, as JSON lines, on one long-lived HTTP/2 stream, POST
// /peer/v1/tell/{client id}/{epoch}, opening a new stream (epoch+1) when
// the last broke. The server delivers a stream's lines in order, and once
// a newer stream of the same client has arrived it delivers nothing more
// from the older one: so what arrives from one client arrives in the
// order it was told, though a stream that breaks may lose what was in
// flight on it (at most once; the delivery protocol above resends).

// DefaultTellQueue is how many messages a sender queues per peer.
const DefaultTellQueue = 1024

// tellPrefix starts a tell stream's path: /peer/v1/tell/{client}/{epoch}.
const tellPrefix = "/peer/v1/tell/"

// tellLine is one message on a tell stream. Sig is set on the last line
// of a batch only (see tellMAC): the batch's signature, which covers its
// lines and chains it to the batch before.
type tellLine struct {
	Seq uint64 `json:"seq"` // 1, 2, ... on each stream
	To  string `json:"to"`  // the actor's path
	Msg []byte `json:"msg"`
	Sig string `json:"sig,omitempty"`
}

// equalSig compares a received signature with the expected one in
// constant time, as equal does, without making strings of them.
func equalSig(got, want []byte) bool {
	return len(got) == signatureLen && hmac.Equal(got, want)
}

// newClientID names a client's streams to the servers, so that they keep
// its messages in order across streams.
func newClientID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// tellPath is the path of a client's stream of the given epoch.
func tellPath(clientID string, epoch uint64) string {
	return tellPrefix + clientID + "/" + strconv.FormatUint(epoch, 10)
}

// parseTellPath reads a tell stream's client id and epoch.
func parseTellPath(uri string) (clientID string, epoch uint64, err error) {
	rest, ok := strings.CutPrefix(uri, tellPrefix)
	id, ep, ok2 := strings.Cut(rest, "/")
	if ok && ok2 && id != "" {
		if epoch, err = strconv.ParseUint(ep, 10, 64); err == nil {
			return id, epoch, nil
		}
	}
	return "", 0, fmt.Errorf("path %q is not %s{client}/{epoch}", uri, tellPrefix)
}

// checkActorPath: a path is not empty and holds no newline (the line
// signature separates fields with them).
func checkActorPath(p string) error {
	if p == "" || strings.ContainsAny(p, "\n\r") {
		return fmt.Errorf("actor path %q is empty or holds a line break", p)
	}
	return nil
}
