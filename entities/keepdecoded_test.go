package entities_test

import (
	"testing"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
)

// Sack is a state with a slice: not flat, so its entities decode it for
// every command, unless its type keeps it decoded.
type Sack struct {
	Items []int `json:"items"`
}

// sackType defines a Sack entity (componentID) whose add command appends in
// a new slice, and whose peek command replies with the address of the
// first item of the state it was given.
func sackType(componentID string) (*entities.Type[Sack], components.EntityMethod[int, Sack], components.EntityMethod[components.Done, *int]) {
	t := entities.Define(componentID, func(string) Sack { return Sack{} })
	add := entities.Command(t, "add", func(ctx *entities.Ctx[Sack, Sack], b Sack, n int) entities.Effect[Sack, Sack] {
		b.Items = append(append(make([]int, 0, len(b.Items)+1), b.Items...), n)
		return ctx.UpdateState(b).ThenReply(b)
	})
	peek := entities.Command(t, "peek", func(ctx *entities.Ctx[Sack, *int], b Sack, _ components.Done) entities.Effect[Sack, *int] {
		return ctx.Reply(&b.Items[0])
	})
	return t, add, peek
}

// TestKeepDecoded: the commands of a KeepDecoded type get the state its
// last write stored as the handler returned it, with no decode in
// between (the same items); without it, each gets a decode of its own.
func TestKeepDecoded(t *testing.T) {
	for _, keep := range []bool{true, false} {
		name := map[bool]string{true: "kept", false: "decoded"}[keep]
		t.Run(name, func(t *testing.T) {
			typ, add, peek := sackType("sack-" + name)
			if keep {
				typ.KeepDecoded()
			}
			n := startNode(t, entities.NewMemoryStore())
			if _, err := typ.Start(entities.Host{System: n.sys, Client: n.client, Store: entities.NewMemoryStore()}); err != nil {
				t.Fatal(err)
			}
			b, err := add.Invoke(t.Context(), n.client, "b", 7)
			if err != nil || len(b.Items) != 1 || b.Items[0] != 7 {
				t.Fatalf("add = %+v, %v", b, err)
			}
			first, err := peek.Invoke(t.Context(), n.client, "b", components.Done{})
			if err != nil {
				t.Fatal(err)
			}
			second, err := peek.Invoke(t.Context(), n.client, "b", components.Done{})
			if err != nil {
				t.Fatal(err)
			}
			if *first != 7 || (first == second) != keep || (first == &b.Items[0]) != keep {
				t.Fatalf("kept %v: the items the commands got are shared %v, %v with the add's; want %v",
					keep, first == second, first == &b.Items[0], keep)
			}
		})
	}
}
