package views

import (
	"context"
	"encoding/json"
	"hash/fnv"
)

// token is what a page token holds: the query it continues (view, query,
// and a hash of its parameters), the index key of the last row returned,
// and the view's write counter when the first page was read. A row whose
// index entry was made after it (the row entered the result, or moved in
// it, since) is left out of the later pages, so no row is seen twice. Nothing in it depends on the instance that made it:
// it is sealed with the key kept in the store (seal.go), so any instance,
// and one restarted, takes it, and a token altered or made up is refused.
type token struct {
	Version int    `json:"t"`
	View    string `json:"v"`
	Gen     string `json:"g"`
	Query   string `json:"q"`
	Hash    uint64 `json:"h"`
	Last    []byte `json:"k"`
	Seq     uint64 `json:"s,omitempty"`
}

const tokenVersion = 2

// hash is a request's fingerprint: its parameters and bounds.
func (s *scan) hash() uint64 {
	h := fnv.New64a()
	for _, part := range []string{s.prefix, s.lo, s.hi} {
		_, _ = h.Write([]byte(part))
		_, _ = h.Write([]byte{0xFF})
	}
	return h.Sum64()
}

// sealToken is t as a page's Next: its JSON sealed with the store's key.
func (r *Runner) sealToken(ctx context.Context, t *token) (string, error) {
	key, err := r.sealKey(ctx)
	if err != nil {
		return "", err
	}
	data, _ := json.Marshal(t) // a struct of plain fields: never fails
	return seal(key, "token", t.View, data), nil
}

// parseToken reads text as a token of query s of d (the generation
// answering); it fails with ErrBadToken.
func (r *Runner) parseToken(ctx context.Context, text string, d *viewDef, s *scan) (*token, error) {
	view := d.name
	key, err := r.sealKey(ctx)
	if err != nil {
		return nil, err
	}
	data, ok := unseal(key, "token", view, text)
	var t token
	if ok {
		err = json.Unmarshal(data, &t)
	}
	switch {
	case !ok:
		return nil, refuse(ErrBadToken, "token", "not a page token of view %s of this service (malformed, altered, or made for another view or service: take the token from the previous page's next, as it is)", view)
	case err != nil || t.Version != tokenVersion || len(t.Last) == 0:
		return nil, refuse(ErrBadToken, "token", "not a page token of this version of the service")
	case t.View != view || t.Query != s.q.name:
		return nil, refuse(ErrBadToken, "token", "a token of query %s of view %s, not of query %s of view %s", t.Query, t.View, s.q.name, view)
	case t.Hash != s.hash():
		return nil, refuse(ErrBadToken, "token", "made for other parameters: a token goes on only the query it came from, with the same parameters")
	case t.Gen != d.gen:
		return nil, refuse(ErrBadToken, "token", "made before view %s was rebuilt: read the first page again", view)
	}
	return &t, nil
}
