package eventsourced_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/eventsourced"
)

// TestTry: one command against a given state reports the events it
// persisted, the state after them and its reply, for every effect, and
// never changes its input.
func TestTry(t *testing.T) {
	given := Wallet{Balance: 5, Notes: []string{"+"}}
	cases := []struct {
		name string
		out  func() (events []any, state Wallet, reply any, deleted bool, err error)
		want string
	}{
		{"Persist", func() ([]any, Wallet, any, bool, error) {
			o := eventsourced.Try(Wallets, Move, "w-1", given, 2, nil)
			return o.Events, o.State, o.Reply, o.Deleted, o.Err
		}, "[{2} {2 moved}] {5 [+ - +moved]} 3 false <nil>"},
		{"Reply", func() ([]any, Wallet, any, bool, error) {
			o := eventsourced.Try(Wallets, Balance, "w-1", given, components.Done{}, nil)
			return o.Events, o.State, o.Reply, o.Deleted, o.Err
		}, "[] {5 [+]} {5 [+]} false <nil>"},
		{"Refuse", func() ([]any, Wallet, any, bool, error) {
			o := eventsourced.Try(Wallets, Move, "w-1", given, 9, nil)
			return o.Events, o.State, o.Reply, o.Deleted, o.Err
		}, "[] {5 [+]} 0 false move 9: the balance is 5"},
		{"Delete", func() ([]any, Wallet, any, bool, error) {
			o := eventsourced.Try(Wallets, Close, "w-1", given, components.Done{}, nil)
			return o.Events, o.State, o.Reply, o.Deleted, o.Err
		}, "[{5}] {0 [+ -]} 5 true <nil>"},
		{"OverTheLimit", func() ([]any, Wallet, any, bool, error) {
			o := eventsourced.Try(Wallets, Deposit, "w-1", given, Deposited{Amount: 1, Note: strings.Repeat("x", 300)}, nil)
			return o.Events, o.State, o.Reply, o.Deleted, o.Err
		}, `[] {5 [+]} {0 []} false event "deposited" is 322 bytes encoded, over the limit of 200 bytes`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			events, state, reply, deleted, err := c.out()
			if got := fmt.Sprint(fmt.Sprint(events), " ", state, " ", reply, " ", deleted, " ", err); got != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
			if fmt.Sprint(given) != "{5 [+]}" {
				t.Fatalf("Try changed its input: %+v", given)
			}
		})
	}
}

// TestTestKit: commands in a row keep the state and the journal; a
// refusal keeps neither; after a delete every command is refused.
func TestTestKit(t *testing.T) {
	kit := eventsourced.NewTestKit(Wallets, "w-1", nil)
	kit.Given(Deposited{Amount: 3, Note: "given"})
	if out := eventsourced.Exec(kit, Deposit, Deposited{Amount: 2}); out.Err != nil || out.Reply.Balance != 5 {
		t.Fatalf("deposit: %+v", out)
	}
	if out := eventsourced.Exec(kit, Move, 9); out.Err == nil {
		t.Fatalf("move 9 of 5: %+v, want a refusal", out)
	}
	if out := eventsourced.Exec(kit, Close, components.Done{}); out.Err != nil || out.Reply != 5 || !kit.Deleted() {
		t.Fatalf("close: %+v", out)
	}
	out := eventsourced.Exec(kit, Deposit, Deposited{Amount: 1})
	if out.Err == nil || !strings.Contains(out.Err.Error(), `wallet "w-1" was deleted (after event 3)`) {
		t.Fatalf("deposit after close: %v", out.Err)
	}
	if got := fmt.Sprint(kit.Events(), " ", kit.State()); got != "[{3 given} {2 } {5}] {0 [+given + -]}" {
		t.Fatalf("journal and state: %s", got)
	}
}
