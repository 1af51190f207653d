// Package keyspace owns how Trellis names its Redis keys: the default
// prefix, the rule a prefix must follow, the hash tags that decide which
// Redis Cluster slot a key lives in, and the slot of a key.
//
// Every key a service writes starts with its prefix and a ':' and then
// names an area (entity, timers, …):
//
//	<prefix>:<area>:<rest>          a key that is alone in its slot's choice
//	<prefix>:<area>:{<tag>}:<rest>  a key in the slot of its tag
//
// In a Redis Cluster a key's slot is the CRC16 of its hash tag, the text
// between the first '{' and the next '}', or of the whole key when it has
// no tag. Keys that one Lua script touches together must share a slot, so
// they share a tag: a timer partition's keys, one producer's queue. Keys
// that are never touched together carry no common tag, so they spread over
// every master. That is why a prefix may not contain braces: the first
// '{' of a key would be the prefix's, and every key of the service would
// land in one slot.
package keyspace

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// DefaultPrefix is the prefix of every store when none is configured.
const DefaultPrefix = "trellis"

// MaxPrefixLen bounds a prefix: it is repeated in every key, so a long one
// costs memory per entity, and nothing needs more to tell services apart.
const MaxPrefixLen = 64

// ErrBadPrefix is wrapped by every error of [CheckPrefix].
var ErrBadPrefix = errors.New("invalid Redis key prefix")

// PrefixError is a prefix [CheckPrefix] refused. It wraps ErrBadPrefix.
type PrefixError struct {
	Prefix string
	// Reason says what is wrong and what is allowed.
	Reason string
}

func (e *PrefixError) Error() string { return ErrBadPrefix.Error() + ": " + e.Reason }

// Unwrap returns ErrBadPrefix.
func (e *PrefixError) Unwrap() error { return ErrBadPrefix }

// CheckPrefix reports whether p can start a service's keys: 1 to
// MaxPrefixLen characters of A-Z a-z 0-9 . _ - :, not ending in ':'; a
// refusal is a *PrefixError. The prefix is also how an operator finds a
// service's keys, as the pattern <prefix>:* of SCAN: a glob character
// (* ? [ ] \) would make it match other keys, a space or control
// character would not show in redis-cli, and a brace would make a hash
// tag of it (see the package comment). A trailing ':' is the separator
// the keys add themselves.
func CheckPrefix(p string) error {
	bad := func(format string, args ...any) error {
		return &PrefixError{Prefix: p, Reason: fmt.Sprintf(format, args...)}
	}
	if p == "" {
		return bad("must not be empty: every Redis key starts with it (default %q)", DefaultPrefix)
	}
	if i := strings.IndexFunc(p, func(r rune) bool { return r >= utf8.RuneSelf || !prefixByte(byte(r)) }); i >= 0 {
		r, _ := utf8.DecodeRuneInString(p[i:])
		why := ""
		if r == '{' || r == '}' {
			why = " (Trellis puts the cluster hash tags into its keys itself: a brace in the prefix would put every key of the service in one slot)"
		}
		return bad("%q has %q at byte %d: use only letters A-Z a-z, digits and . _ - : (no spaces, no braces, no glob characters * ? [ ] \\)%s", p, r, i, why)
	}
	// Only ASCII is left, so bytes are characters.
	if len(p) > MaxPrefixLen {
		return bad("is %d characters long; at most %d", len(p), MaxPrefixLen)
	}
	if strings.HasSuffix(p, ":") {
		return bad("%q ends in ':': leave it off, the keys put a ':' after the prefix themselves", p)
	}
	return nil
}

func prefixByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("._-:", c) >= 0
}

// Space is one service's keys: a checked prefix.
type Space struct{ prefix string }

// New returns the space of prefix ([DefaultPrefix] when empty), or an error
// wrapping ErrBadPrefix.
func New(prefix string) (Space, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := CheckPrefix(prefix); err != nil {
		return Space{}, err
	}
	return Space{prefix: prefix}, nil
}

// Must is New for prefixes known to be good; it panics on a bad one.
func Must(prefix string) Space {
	s, err := New(prefix)
	if err != nil {
		panic(err)
	}
	return s
}

// Prefix returns the space's prefix.
func (s Space) Prefix() string { return s.prefix }

// Key returns <prefix>:<area>:<rest>, a key with no tag of its own: its
// slot is the hash of the whole key (or of a tag in rest, when rest holds
// braces).
func (s Space) Key(area, rest string) string { return s.prefix + ":" + area + ":" + rest }

// Tagged returns <prefix>:<area>:{<tag>}:<rest>: every key with the same
// prefix, area and tag is in one slot. tag must not contain '}' (it would
// end the tag early); Tagged panics if it does, since tags are made by
// Trellis, never taken from input.
func (s Space) Tagged(area, tag, rest string) string {
	return s.prefix + ":" + area + ":" + Tag(tag) + ":" + rest
}

// Tag returns "{tag}". It panics if tag is empty or holds a brace: an
// empty tag is no tag (Redis hashes the whole key), and a brace would end
// or open it early.
func Tag(tag string) string {
	if tag == "" || strings.ContainsAny(tag, "{}") {
		panic(fmt.Sprintf("keyspace: %q cannot be a hash tag", tag))
	}
	return "{" + tag + "}"
}

// Pattern returns the SCAN pattern of every key in the space.
func (s Space) Pattern() string { return s.prefix + ":*" }
