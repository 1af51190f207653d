// Package peer is the transport between the instances of a Trellis
// cluster: an instance that does not own an entity forwards the command
// to the instance that does ([Client.Forward]), and the owner runs it
// ([Server], with a [Handler]). Membership and shard ownership — who owns
// what, at which address — are package cluster's; this package only
// carries calls to an address, and says precisely how a call failed.
//
//	// on every instance
//	srv, err := peer.NewServer(peer.ServerConfig{Secret: secret, Handler: runLocally})
//	err = srv.Start(":9100")
//	defer srv.Shutdown(ctx)
//	client, err := peer.NewClient(peer.ClientConfig{Secret: secret})
//	defer client.Close()
//
//	// in the component client, for an entity owned elsewhere
//	reply, err := client.Forward(ctx, ownerAddr, peer.Call{ComponentID: "orders", Method: "Place", EntityID: id, Argument: arg})
//	if errors.Is(err, peer.ErrMoved) { /* refresh the owner, forward once more */ }
//
// # Wire
//
// Cleartext HTTP/2 with prior knowledge (h2c), or HTTP/2 over TLS, from
// net/http alone: one long-lived connection per peer. HTTP/2 PINGs find a connection that
// stopped carrying anything ([Health]); it is closed, which ends the
// streams on it, and the next call dials again.
//
// Forwards go on a call stream, one long-lived full-duplex HTTP/2 stream
// per client and peer, opened on the first call and again after it ends:
//
//	POST /peer/v1/calls?client={client id}&stream={n}&max_reply={the client's MaxBodyBytes}   Trellis-Time, Trellis-Signature (no body digest: the body is a stream)
//
// (the client's id and the stream's number make each stream's signature,
// which its lines chain to, its own), answered 200 with
// Trellis-Signature at once (the client writes nothing before), after which the request body carries call lines and the
// response body reply lines, JSON lines read with a bufio.Scanner (whose
// buffer bounds a line), no framing of our own:
//
//	→ {"seq":1,"path":"/peer/v1/forward/{component}/{method}/{entity}","timeout":"1.5s","trace":"<traceparent>\n<tracestate>","arg":"<base64>","sig":"…"}
//	→ {"seq":2,"cancel":1,"sig":"…"}                 the caller of call 1 canceled
//	← {"seq":1,"status":200,"body":"<base64 of the reply's JSON>","sig":"…"}
//	← {"seq":1,"status":422,"body":"<base64 of {\"kind\",\"code\",\"message\"}>","sig":"…"}
//	← {"seq":7,"end":true,"status":503,"body":"<base64 of the error>","sig":"…"}   no line past 7 was read
//
// Each line is byte for byte what an encoding/json Encoder writes for
// callLine or replyLine (the fields in this order, the empty ones a call
// line omits left out, bytes in standard base64, a nil body null); both
// peers write that form without reflection (encoding/json itself for a
// line with a string it escapes, such as a trace with a tracestate) and
// read it directly, handing any other JSON to json.Unmarshal.
//
// The client numbers its lines 1, 2, ... in the order written; names are
// path-escaped as in a request's path (entity may be empty); trace, from
// the caller's span, and arg may be absent. The deadline travels as the
// time left, not as an instant, so the peers' clocks need not agree for
// it; the server applies it to the handler's context. A caller that
// cancels writes a cancel line, which cancels the handler's context (one
// whose deadline passes writes none: the server's deadline ends the
// handler); a connection that breaks cancels every handler on it. The server runs
// the calls concurrently (a slow one holds up no other) and answers each
// with a reply line of the same seq when it finishes, so replies come in
// the order the calls finish. A stream carries at most 250 calls without
// a reply: past that a forward waits for a slot within its deadline, and
// a server that reads more stops reading, which HTTP/2 flow control turns
// into backpressure on the client. A reply over max_reply is answered
// {"kind":"too_large",...,"outcome_unknown":true} instead. When the server stops
// reading before the client ended the body (Shutdown, or a line that
// fails its check) it writes an end line naming the last line it read:
// the calls after it did not run. It then lets the calls it read finish
// and answer, and ends the response. Client.Close ends the request body:
// the server answers what it runs, then ends the response.
//
// A call whose line would exceed 64 KiB (a large argument) goes as a
// request of its own instead, so that it does not hold up the calls
// queued behind it on the stream; so does a call to a peer that answers
// a stream's opening 404 (a version without call streams, during a
// rolling upgrade):
//
//	POST /peer/v1/forward/{component}/{method}/{entity}   (each path-escaped)
//	Trellis-Time: <Unix ms>  Trellis-Timeout: <Go duration>  Trellis-Body-Digest: <base64url SHA-256 of the argument>
//	Trellis-Signature: <base64url>  [traceparent, tracestate]
//	<the argument's JSON>
//
// answered 200 with the reply's JSON, or an error status with
// {"kind","code","message"}, and Trellis-Signature; the caller's
// cancellation reaches the handler as an RST_STREAM.
//
// gRPC (with a JSON codec and a hand-written ServiceDesc) was the other
// choice. It would bring a large dependency and its own conventions for
// deadlines, keepalives and status codes, for what net/http's HTTP/2
// already does here: multiplexing and flow control, cancellation by
// RST_STREAM, PING health checks, and full-duplex streams for Tell.
// Nothing this package needs is missing from net/http.
//
// # Authentication
//
// The peers share a secret (setting EnvSecret, at least 32 bytes) and
// never send it. Each request (a stream's opening or a forward of its
// own) carries an HMAC-SHA256 over the method, the path and query and a
// timestamp, a forward's over its timeout, trace context and its body's
// SHA-256 too (the body's own header); the server checks the timestamp
// within MaxSkew and the HMAC in constant time, and answers 401 (logging
// why, without the secret) to anything else. Since no signature covers
// the body itself, every one is checked before the server reads a byte
// of a body: a stranger's body is never read (a forward's is read once
// its headers check, and refused if it does not match its digest). Peers
// that signed a forward's body itself (earlier versions) and peers that
// sign its digest refuse each other's forwards of their own (arguments
// over 64 KiB) until both run one version. Each answer carries an HMAC
// over the request's signature, the status and the body, so the caller
// too knows whom it talks to: the peers authenticate each other. On a
// stream each line is signed too, chained to the stream's signature and
// its place in it: a call line over its seq, cancel, path, timeout,
// trace and argument; a reply line over its call line's signature (so it
// is bound to its call), status and body; an end line over the stream's
// signature, its seq, status and body. A line that fails its signature
// or comes out of place (forged, altered, replayed, reordered, or taken
// from another stream) runs nothing and ends the stream; a reply line
// that fails its check ends the stream on the client. Without a secret, a
// server refuses everything and a client sends nothing. A bearer secret
// was the alternative; over cleartext it would hand the secret to anyone
// who can read the traffic, the HMAC does not.
//
// A request captured on the wire and sent again is refused: the server
// remembers the signature of every request it accepted (a stream's
// opening, a forward of its own) while its timestamp is within MaxSkew,
// after which the timestamp refuses it (see replayGuard), so a captured
// stream, with every call on it, runs once. The memory is bounded
// (ReplayMemory, about 6 MiB); when it is full, requests are answered
// ErrUnavailable, unrun, until the oldest leave the window.
//
// Over cleartext the arguments travel in the clear. With TLS
// (ServerConfig.TLS, ClientConfig.TLS, made by TLSFiles.Load) the same
// protocol runs as HTTP/2 over TLS 1.3 with mutual authentication against
// the cluster's own CA, and the signatures still run: a leaked
// certificate alone runs nothing.
//
// # Failures
//
// Every failure of Forward is an [*Error] whose [Kind] survives the trip:
// a handler's [NewError] (or a wrapped sentinel) arrives with its kind,
// code and message, so errors.Is(err, ErrMoved) holds on the caller's
// side. Kinds found by the transport say whether the call may have run:
// ErrUnavailable alone means it did not (the peer could not be reached,
// the call's line was never written, the stream broke before the
// transport took all of the line from the client, or the server's end
// line says it was not read), with ErrOutcomeUnknown it may have (the
// connection broke after the transport took the line; the deadline
// passed; the caller canceled). A call that surely did not run because
// its stream ended is sent once more on a new stream before Forward
// fails. The component layer maps its own errors to kinds
// and codes and back (a conflict refusal is KindRefused with code
// "conflict"); this package does not import components, which will import
// it.
//
// # Tell: one-way actor messages
//
// Remote actor refs and reliable delivery need [Client.Tell](addr,
// actorPath, msg): one-way, in order per sender–receiver pair, at most
// once (the delivery protocol above it resends and deduplicates). Tell
// queues the message (bounded: TellQueue, past which it fails at once
// with ErrUnavailable) for the peer's sender, a goroutine that writes the
// queue on one long-lived stream on the same connection,
//
//	POST /peer/v1/tell/{client id}/{epoch}   Trellis-Time, Trellis-Signature (no body digest: the body is a stream)
//	{"seq":1,"to":"actor/path","msg":"<base64>"}\n
//	{"seq":2,"to":"actor/path","msg":"<base64>","sig":"<base64url HMAC over lines 1 and 2>"}\n
//	{"seq":3,"to":"actor/path","msg":"<base64>","sig":"<HMAC over line 3, chained to the one before>"}\n ...
//
// JSON lines, read with a bufio.Scanner (whose buffer bounds a line): no
// framing of our own. The lines are signed in batches: the lines the
// sender writes in one go, until its queue is empty (at most 128 lines or
// 64 KiB of messages), are a batch, and only its last line carries "sig",
// an HMAC-SHA256 with the cluster secret over
//
//	"trellis-peer/1 tell\n" previous-sig "\n", then per line: seq "\n" to "\n" len(msg) "\n" msg
//
// where previous-sig is the last batch's signature, or the stream's
// request signature for the first batch. The server holds a batch's
// lines until its signature checks and delivers none of them otherwise;
// a line out of place (seq not the next), a batch past its bounds
// unsigned, or a bad signature ends the stream, so lines cannot be
// forged, dropped, reordered or replayed within it unseen, and a stream
// that ends within a batch delivers nothing of that batch. One HMAC per
// batch instead of per line spares the sender and the server most of
// their hashing under load; a lone message is a batch of one, sent as
// soon as it is told.
//
// The sender writes each line byte for byte as an encoding/json Encoder
// would (tellLine, "sig" omitted when empty), without reflection (the
// Encoder itself when the path needs escaping), and the server reads that
// form directly, handing any other JSON to json.Unmarshal; the
// signatures are made into reused buffers, so a line costs the sender no
// allocation and the server only its message. Peers that sign every
// line (versions before batches) and peers that sign batches refuse each
// other's streams: what is told between them is lost, and resent by the
// delivery protocol once both run one version.
//
// The server hands each verified line to ServerConfig.Receive in order,
// one batch under one check of the stream's epoch; when a stream breaks,
// the sender opens a new one (backoff while the peer cannot be reached)
// and the server, seeing the newer epoch, delivers nothing more from the
// older: what arrives arrives in the order told, and what was in flight
// on a broken stream may be lost. A sender ends after 10 minutes without messages;
// Client.Close stops all of them (what they still queue is dropped);
// Server.Shutdown ends the tell streams at once, stops reading the call
// streams, then drains the forwards.
package peer
