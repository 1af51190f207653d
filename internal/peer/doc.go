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
// Cleartext HTTP/2 with prior knowledge (h2c), from net/http alone: one
// long-lived connection per peer, every call a stream on it, so calls do
// not wait for each other and a slow one does not hold a connection.
// HTTP/2 PINGs find a connection that stopped carrying anything
// ([Health]); the next call dials again. A forward is
//
//	POST /peer/v1/forward/{component}/{method}/{entity}   (each path-escaped; entity may be empty)
//	Trellis-Time: <Unix ms>  Trellis-Timeout: <Go duration>  Trellis-Signature: <base64url>
//	<the argument's JSON>
//
// answered 200 with the reply's JSON, or an error status with
// {"kind","code","message"}, and Trellis-Signature. The deadline travels
// as the time left, not as an instant, so the peers' clocks need not
// agree for it; the server applies it to the handler's context, which is
// also canceled when the caller cancels (HTTP/2 RST_STREAM) or the
// connection breaks.
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
// never send it. Each request carries an HMAC-SHA256 over the method, the
// path, a timestamp, the timeout and the body; the server checks the
// timestamp within MaxSkew and the HMAC in constant time, and answers 401
// (logging why, without the secret) to anything else. Each reply carries
// an HMAC over the request's signature, the status and the body, so the
// caller too knows whom it talks to: the peers authenticate each other.
// Without a secret, a server refuses everything and a client sends
// nothing. A bearer secret was the alternative; over cleartext it would
// hand the secret to anyone who can read the traffic, the HMAC does not.
//
// What this does not give: confidentiality (the arguments travel in the
// clear — run the cluster on a private network, or add TLS, which
// net/http can take with no change to the protocol), and protection from
// a replay within MaxSkew of a request captured on the wire.
//
// # Failures
//
// Every failure of Forward is an [*Error] whose [Kind] survives the trip:
// a handler's [NewError] (or a wrapped sentinel) arrives with its kind,
// code and message, so errors.Is(err, ErrMoved) holds on the caller's
// side. Kinds found by the transport say whether the call may have run:
// ErrUnavailable alone means it did not (the peer could not be reached),
// with ErrOutcomeUnknown it may have (the connection broke after sending;
// the deadline passed). The component layer maps its own errors to kinds
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
// Server.Shutdown ends the streams at once, then drains the forwards.
package peer
