package entities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/trellis-go/trellis/components"
)

// Default retentions of applied records (see Host).
const (
	// DefaultKeyRetention is how long an entity keeps the answer of a
	// command invoked with an idempotency key: as long as the ingress
	// keeps an Idempotency-Key's answer.
	DefaultKeyRetention = 24 * time.Hour
	// DefaultCommandIDRetention is how long it keeps the answer of a
	// command that carried only the platform's own command id: a small
	// multiple of the request timeout, the longest a command can be on
	// its way.
	DefaultCommandIDRetention = 2 * time.Minute
)

// Applied is a command's answer recorded with the write that applied it,
// in the same atomic write as the entity's state: while it is kept, a
// write that carries the same Key writes nothing and fails with an
// *AlreadyAppliedError holding the recorded Answer.
type Applied struct {
	// Key names the command within its entity (see appliedFor): the
	// class of the key ('k' a caller's idempotency key, 'i' the
	// platform's command id), the command's name and the key.
	Key string
	// Answer is the command's answer (encodeAnswer's form).
	Answer []byte
	// Retention is how long the record is kept.
	Retention time.Duration
}

// class is the record's class: 'k' or 'i'. Records of one class expire in
// the order they were made, which is how stores trim them.
func (a *Applied) class() byte { return a.Key[0] }

// AlreadyAppliedError is the error of a write that carried an Applied
// whose Key was recorded already: nothing was written; Answer is the
// first answer.
type AlreadyAppliedError struct {
	Answer []byte
}

func (e *AlreadyAppliedError) Error() string { return "the command was applied already" }

// appliedKey is ctx's key of a write's Applied record.
type appliedKey struct{}

// withApplied makes ctx carry a, the record a Store's Save or Delete (and
// their fenced forms) writes with the state. Stores read it with
// appliedIn.
func withApplied(ctx context.Context, a *Applied) context.Context {
	if a == nil {
		return ctx
	}
	return context.WithValue(ctx, appliedKey{}, a)
}

// appliedIn is the record ctx carries for the write, or nil.
func appliedIn(ctx context.Context) *Applied {
	a, _ := ctx.Value(appliedKey{}).(*Applied)
	return a
}

// appendApplied appends a's key, answer and retention in milliseconds
// to a script's arguments, as the Redis scripts take them (applied.lua):
// "" for no record.
func appendApplied(args []any, a *Applied) []any {
	if a == nil {
		return append(args, "", "", 0)
	}
	return append(args, a.Key, a.Answer, a.Retention.Milliseconds())
}

// alreadyApplied is the error of a write whose record was kept already,
// from the Redis scripts' reply of the first answer.
func alreadyApplied(op, entityType, id string, answer any) error {
	text, _ := answer.(string)
	return opErr(op, entityType, id, &AlreadyAppliedError{Answer: []byte(text)})
}

// commandKey is how a command is known to its entity's applied records:
// the caller's idempotency key (class 'k'), else the platform's command id
// (class 'i'), scoped to the command's name; "" when ctx carries neither.
// The entity type and id need no place in it: records are kept per
// entity.
func commandKey(ctx context.Context, method string) (key string, caller bool) {
	if k, ok := components.IdempotencyKeyFrom(ctx); ok {
		return "k" + strconv.Itoa(len(method)) + ":" + method + ":" + k, true
	}
	if id, ok := components.CommandIDFrom(ctx); ok {
		return "i" + strconv.Itoa(len(method)) + ":" + method + ":" + id, false
	}
	return "", false
}

// encodeAnswer is a command's answer as recorded: 'r' and the reply's
// JSON, or 'e', the refusal's kind (one decimal digit) and its message.
func encodeAnswer(reply any, refusal *components.CommandError) ([]byte, error) {
	if refusal != nil {
		return append([]byte{'e', '0' + byte(refusal.Kind)}, refusal.Message...), nil
	}
	b, err := json.Marshal(reply)
	if err != nil {
		return nil, fmt.Errorf("encode the reply to record it: %w", err)
	}
	return append([]byte{'r'}, b...), nil
}

// decodeAnswer is a recorded answer as a command's outcome: its reply as a
// components.RemoteReply (which typed handles decode), or its refusal.
func decodeAnswer(answer []byte) (any, error) {
	switch {
	case len(answer) >= 1 && answer[0] == 'r':
		return components.RemoteReply(answer[1:]), nil
	case len(answer) >= 2 && answer[0] == 'e':
		return nil, &components.CommandError{Kind: components.ErrorKind(answer[1] - '0'), Message: string(answer[2:])}
	}
	return nil, fmt.Errorf("corrupt applied answer %q", answer)
}

// replayed reports whether err says the command was applied already (an
// *AlreadyAppliedError), and then its first answer.
func replayed(err error) (bool, outcome) {
	if err == nil {
		return false, outcome{}
	}
	var done *AlreadyAppliedError
	if !errors.As(err, &done) {
		return false, outcome{}
	}
	value, replyErr := decodeAnswer(done.Answer)
	return true, outcome{Value: value, Err: replyErr}
}

// AppliedFor is the record of the command method that ctx carries a key
// for, with its answer (reply, or refusal when not nil), to be written
// with the command's write (see AppliedStore): nil when ctx carries no key
// (commandKey). A caller's idempotency key is kept for keyRetention, the
// platform's command id for idRetention. Entity kinds other than
// key-value ones (package eventsourced) record their commands with it.
func AppliedFor(ctx context.Context, method string, reply any, refusal *components.CommandError,
	keyRetention, idRetention time.Duration) (*Applied, error) {
	key, caller := commandKey(ctx, method)
	if key == "" {
		return nil, nil
	}
	answer, err := encodeAnswer(reply, refusal)
	if err != nil {
		return nil, err
	}
	retention := keyRetention
	if !caller {
		retention = idRetention
	}
	return &Applied{Key: key, Answer: answer, Retention: retention}, nil
}

// Replayed reports whether err says the command was applied already (an
// *AlreadyAppliedError), and then its first answer: its reply (a
// components.RemoteReply) or its refusal.
func Replayed(err error) (ok bool, reply any, replyErr error) {
	done, out := replayed(err)
	return done, out.Value, out.Err
}
