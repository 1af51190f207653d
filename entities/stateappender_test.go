package entities_test

import (
	"strconv"
	"testing"

	"github.com/trellis-go/trellis/entities"
)

// Tally writes its own JSON: its fields in the opposite order to
// json.Marshal's, so the store shows whose encoding it holds.
type Tally struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func (t *Tally) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"count":`...)
	b = strconv.AppendInt(b, int64(t.Count), 10)
	b = append(b, `,"name":`...)
	return append(strconv.AppendQuote(b, t.Name), '}'), nil
}

// TestStateAppender: an entity whose *S is a StateAppender stores the
// bytes its AppendJSON writes, and reads them back.
func TestStateAppender(t *testing.T) {
	typ := entities.Define("tally", func(id string) Tally { return Tally{Name: id} })
	bump := entities.Command(typ, "bump", func(ctx *entities.Ctx[Tally, Tally], s Tally, n int) entities.Effect[Tally, Tally] {
		s.Count += n
		return ctx.UpdateState(s).ThenReply(s)
	})
	store := entities.NewMemoryStore()
	n := startNode(t, store)
	if _, err := typ.Start(entities.Host{System: n.sys, Client: n.client, Store: store}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := bump.Invoke(t.Context(), n.client, "t-1", 2); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := store.Load(t.Context(), "tally", "t-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"count":4,"name":"t-1"}`; string(rec.Data) != want {
		t.Errorf("stored %s, want %s", rec.Data, want)
	}
}
