package ledger_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/eventsourced"
	"github.com/trellis-go/trellis/samples/ledger"
	"github.com/trellis-go/trellis/trellistest"
)

func TestMain(m *testing.M) { os.Exit(trellistest.Servers(m).Run()) }

// TestCommands: each command's events and the state after them, with the
// unit test kit.
func TestCommands(t *testing.T) {
	cases := []struct {
		name string
		run  func(k *eventsourced.TestKit[ledger.Account]) (events []any, err error)
		want string // events, error, then the state
	}{
		{"Deposit", func(k *eventsourced.TestKit[ledger.Account]) ([]any, error) {
			out := eventsourced.Exec(k, ledger.Deposit, 30)
			return out.Events, out.Err
		}, "[{30}] <nil> {130 2}"},
		{"WithdrawTooMuch", func(k *eventsourced.TestKit[ledger.Account]) ([]any, error) {
			out := eventsourced.Exec(k, ledger.Withdraw, 101)
			return out.Events, out.Err
		}, "[] withdraw 101: the balance is 100 {100 1}"},
		{"BadAmount", func(k *eventsourced.TestKit[ledger.Account]) ([]any, error) {
			out := eventsourced.Exec(k, ledger.Deposit, 0)
			return out.Events, out.Err
		}, "[] amount 0: must be from 1 to 1000000 {100 1}"},
		{"Close", func(k *eventsourced.TestKit[ledger.Account]) ([]any, error) {
			out := eventsourced.Exec(k, ledger.Close, components.Done{})
			return out.Events, out.Err
		}, "[{100}] <nil> {0 2}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := eventsourced.NewTestKit(ledger.Accounts, "a-1", nil)
			k.Given(ledger.Deposited{Amount: 100})
			events, err := c.run(k)
			if got := fmt.Sprint(events, " ", err, " ", k.State()); got != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestHTTP drives the account over HTTP on the embedded store and on
// Redis: movements, a refusal, the history from the journal, the close
// and a command after it.
func TestHTTP(t *testing.T) {
	targets := map[string]func(t *testing.T) *trellistest.Service{
		"memory": func(t *testing.T) *trellistest.Service { return trellistest.Start(t, ledger.Setup) },
		"redis": func(t *testing.T) *trellistest.Service {
			trellistest.Long(t)
			ts := trellistest.StartInstances(t, 1, ledger.Setup)[0]
			trellistest.WaitSettled(t, ts)
			return ts
		},
	}
	for name, start := range targets {
		t.Run(name, func(t *testing.T) {
			ts := start(t)
			steps := []struct {
				method, path string
				body         any
				status       int
				want         string
			}{
				{"POST", "/ledger/a-1/deposit", ledger.Movement{Amount: 70}, 200, `{"balance":70,"movements":1}`},
				{"POST", "/ledger/a-1/withdraw", ledger.Movement{Amount: 20}, 200, `{"balance":50,"movements":2}`},
				{"POST", "/ledger/a-1/withdraw", ledger.Movement{Amount: 80}, 409, ""},
				{"GET", "/ledger/a-1", nil, 200, `{"balance":50,"movements":2}`},
				{"GET", "/ledger/a-1/history", nil, 200, `[{"seq":1,"kind":"deposited","amount":70},{"seq":2,"kind":"withdrawn","amount":20}]`},
				{"GET", "/ledger/a-1/history?after=1", nil, 200, `[{"seq":2,"kind":"withdrawn","amount":20}]`},
				{"GET", "/ledger/a-1/history?after=x", nil, 400, ""},
				{"DELETE", "/ledger/a-1", nil, 200, `{"balance":0,"movements":3}`},
				{"POST", "/ledger/a-1/deposit", ledger.Movement{Amount: 1}, 404, ""},
			}
			for _, s := range steps {
				resp := ts.Do(t, s.method, s.path, s.body)
				if resp.Status != s.status || (s.want != "" && trim(resp.Body) != s.want) {
					t.Fatalf("%s %s: %d %s; want %d %s", s.method, s.path, resp.Status, resp.Body, s.status, s.want)
				}
				if s.status >= 400 && resp.Header.Get("Content-Type") != "application/problem+json" {
					t.Fatalf("%s %s: %d with Content-Type %q, want a problem", s.method, s.path, resp.Status, resp.Header.Get("Content-Type"))
				}
			}
		})
	}
}

func trim(b []byte) string {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return string(b)
}
