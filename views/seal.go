package views

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
)

// macLen is how many bytes of HMAC-SHA256 a sealed text carries: enough
// that a forged one passes with a chance of 2^-128.
const macLen = 16

// sealKey is the key page tokens and stream cursors are sealed with: the
// store's (kept in Redis, so that every instance, and an instance after a
// restart, checks what another made), read once.
func (r *Runner) sealKey(ctx context.Context) ([]byte, error) {
	r.keyMu.Lock()
	defer r.keyMu.Unlock()
	if r.key != nil {
		return r.key, nil
	}
	key, err := r.cfg.Store.sealKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("views: the key of the page tokens: %w", err)
	}
	r.key = key
	return key, nil
}

// mac is the MAC of payload as a text of kind for view: a token made for
// one view (or one kind) does not pass as another's.
func mac(key []byte, kind, view string, payload []byte) []byte {
	h := hmac.New(sha256.New, key)
	_, _ = h.Write([]byte(kind))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(view))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(payload)
	return h.Sum(nil)[:macLen]
}

// seal is payload with its MAC, as URL-safe base64.
func seal(key []byte, kind, view string, payload []byte) string {
	return base64.RawURLEncoding.EncodeToString(append(payload, mac(key, kind, view, payload)...))
}

// unseal is the payload of text, a seal of kind for view; ok is false when
// text is not one (malformed, forged, or made for another view or by
// another service).
func unseal(key []byte, kind, view, text string) (payload []byte, ok bool) {
	data, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil || len(data) < macLen {
		return nil, false
	}
	payload, sum := data[:len(data)-macLen], data[len(data)-macLen:]
	return payload, hmac.Equal(sum, mac(key, kind, view, payload))
}
