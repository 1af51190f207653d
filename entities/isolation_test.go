package entities_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// Bag is a state with reference types in it: a handler that writes to its
// slice or map writes through to whatever shares them.
type Bag struct {
	Items []int             `json:"items"`
	Tags  map[string]string `json:"tags"`
}

// scribble changes b's slice element and map entry in place, as a careless
// handler might before it decides not to update the state.
func scribble(b Bag) {
	if len(b.Items) > 0 {
		b.Items[0] = 9
	}
	if b.Tags != nil {
		b.Tags["k"] = "scribbled"
	}
}

// storedBag is the state every case starts from and must still hold.
func storedBag() Bag { return Bag{Items: []int{1}, Tags: map[string]string{"k": "v"}} }

var (
	Bags   = entities.Define("bag", func(string) Bag { return Bag{} })
	PutBag = entities.Command(Bags, "put",
		func(ctx *entities.Ctx[Bag, Bag], _ Bag, b Bag) entities.Effect[Bag, Bag] {
			return ctx.UpdateState(b).ThenReply(b)
		})
	GetBag = entities.Command(Bags, "get",
		func(ctx *entities.Ctx[Bag, Bag], b Bag, _ components.Done) entities.Effect[Bag, Bag] {
			return ctx.Reply(b)
		})
	ScribbleThenReply = entities.Command(Bags, "scribble-reply",
		func(ctx *entities.Ctx[Bag, Bag], b Bag, _ components.Done) entities.Effect[Bag, Bag] {
			scribble(b)
			return ctx.Reply(b)
		})
	ScribbleThenRefuse = entities.Command(Bags, "scribble-refuse",
		func(ctx *entities.Ctx[Bag, Bag], b Bag, _ components.Done) entities.Effect[Bag, Bag] {
			scribble(b)
			return ctx.Conflict("refused after scribbling")
		})
	ScribbleThenPanic = entities.Command(Bags, "scribble-panic",
		func(ctx *entities.Ctx[Bag, Bag], b Bag, _ components.Done) entities.Effect[Bag, Bag] {
			scribble(b)
			panic("after scribbling")
		})
	ScribbleThenUpdate = entities.Command(Bags, "scribble-update",
		func(ctx *entities.Ctx[Bag, Bag], b Bag, _ components.Done) entities.Effect[Bag, Bag] {
			scribble(b)
			return ctx.UpdateState(b).ThenReply(b)
		})
)

// A command that does not update the state leaves the entity's state
// exactly as stored, whatever its handler did to the state it was given,
// and so does an update whose write fails.
func TestHandlerCannotCorruptState(t *testing.T) {
	tests := []struct {
		name      string                                          // the case
		failSaves bool                                            // the store refuses writes during the command
		run       func(context.Context, *components.Client) error // the scribbling command
	}{
		{"reply", false, func(ctx context.Context, c *components.Client) error {
			_, err := ScribbleThenReply.Invoke(ctx, c, "b", done)
			return err
		}},
		{"refusal", false, func(ctx context.Context, c *components.Client) error {
			_, err := ScribbleThenRefuse.Invoke(ctx, c, "b", done)
			return err
		}},
		{"panic", false, func(ctx context.Context, c *components.Client) error {
			_, err := ScribbleThenPanic.Invoke(ctx, c, "b", done)
			return err
		}},
		{"failed write", true, func(ctx context.Context, c *components.Client) error {
			_, err := ScribbleThenUpdate.Invoke(ctx, c, "b", done)
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			redisStore := newTestRedisStore(t, testenv.Redis(t), newTestPrefix())
			store := &faultyRedisStore{RedisStore: redisStore}
			n := startNode(t, store)
			if _, err := Bags.Start(entities.Host{System: n.sys, Client: n.client, Store: store}); err != nil {
				t.Fatal(err)
			}
			if _, err := PutBag.Invoke(ctx, n.client, "b", storedBag()); err != nil {
				t.Fatal(err)
			}
			store.failSaves = tc.failSaves
			_ = tc.run(ctx, n.client)
			store.failSaves = false

			got, err := GetBag.Invoke(ctx, n.client, "b", done)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, storedBag()) {
				t.Errorf("the entity holds %+v after the command, want the stored %+v", got, storedBag())
			}
			rec, err := redisStore.Load(ctx, "bag", "b")
			if err != nil {
				t.Fatal(err)
			}
			if string(rec.Data) != `{"items":[1],"tags":{"k":"v"}}` {
				t.Errorf("the store holds %s", rec.Data)
			}
		})
	}
}

// faultyRedisStore is a real RedisStore whose writes can be refused. The
// test sets failSaves only while no command runs.
type faultyRedisStore struct {
	*entities.RedisStore
	failSaves bool
}

func (s *faultyRedisStore) Save(ctx context.Context, typ, id string, data []byte, expected uint64) (uint64, error) {
	if s.failSaves {
		return 0, errors.New("injected: the store is down")
	}
	return s.RedisStore.Save(ctx, typ, id, data, expected)
}

// Try and the stateful kit never change the state their caller gives them,
// whatever the handler does to it, and report the state the command left.
func TestTestKitsLeaveTheCallersStateAlone(t *testing.T) {
	scribbled := Bag{Items: []int{9}, Tags: map[string]string{"k": "scribbled"}}
	tests := []struct {
		name      string              // the case
		run       func(given Bag) Bag // runs a scribbling command on given; the state it reports after
		wantAfter Bag                 // the reported state
	}{
		{"Try, reply", func(b Bag) Bag { return entities.Try(Bags, ScribbleThenReply, "b", b, done, nil).State }, storedBag()},
		{"Try, refusal", func(b Bag) Bag { return entities.Try(Bags, ScribbleThenRefuse, "b", b, done, nil).State }, storedBag()},
		{"Try, panic", func(b Bag) Bag { return entities.Try(Bags, ScribbleThenPanic, "b", b, done, nil).State }, storedBag()},
		{"Try, update", func(b Bag) Bag { return entities.Try(Bags, ScribbleThenUpdate, "b", b, done, nil).State }, scribbled},
		{"kit, reply", func(b Bag) Bag {
			kit := entities.NewTestKit(Bags, "b", nil)
			kit.SetState(b)
			entities.Exec(kit, ScribbleThenReply, done)
			return kit.State()
		}, storedBag()},
		{"kit, update", func(b Bag) Bag {
			kit := entities.NewTestKit(Bags, "b", nil)
			kit.SetState(b)
			entities.Exec(kit, ScribbleThenUpdate, done)
			return kit.State()
		}, scribbled},
	}
	for _, tc := range tests {
		given := storedBag()
		after := tc.run(given)
		if !reflect.DeepEqual(given, storedBag()) {
			t.Errorf("%s: the caller's state became %+v, want %+v", tc.name, given, storedBag())
		}
		if !reflect.DeepEqual(after, tc.wantAfter) {
			t.Errorf("%s: the state after is %+v, want %+v", tc.name, after, tc.wantAfter)
		}
	}
}
