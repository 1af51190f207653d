package workflows_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/workflows"
)

// Lapse pauses as its command says: for how long, to which step, with how
// large an input for that step.
type Lapse struct {
	Outcome string `json:"outcome,omitempty"`
}

// LapseArg is the command's argument.
type LapseArg struct {
	For       time.Duration `json:"for"`
	Step      string        `json:"step"`
	InputSize int           `json:"inputSize,omitempty"`
}

var (
	Lapses = workflows.Define("lapse", func(string) Lapse { return Lapse{} })

	PauseAs = workflows.Command(Lapses, "pause",
		func(ctx *workflows.Ctx[Lapse, components.Done], s Lapse, a LapseArg) workflows.Effect[Lapse, components.Done] {
			input := "lapsed"
			if a.InputSize > 0 {
				input = strings.Repeat("x", a.InputSize)
			}
			return ctx.UpdateState(s).PauseFor(a.For, a.Step, input).ThenReply(components.Done{})
		})
)

func init() {
	workflows.Step(Lapses, "lapsed",
		func(ctx *workflows.StepCtx[Lapse], s Lapse, how string) workflows.StepEffect[Lapse] {
			s.Outcome = how
			return ctx.UpdateState(s).End()
		})
}

// TestPauseLapses: a pause of no time, or less (one counted to a moment
// that has passed), lapses at once to its step, which must exist as for
// any pause; a pause whose lapse input would take the record over
// MaxRecordBytes is refused, as a step's input would be.
func TestPauseLapses(t *testing.T) {
	cases := []struct {
		name   string
		arg    LapseArg
		refuse string // what the refusal names; "" when the pause lapses
	}{
		{"no time", LapseArg{For: 0, Step: "lapsed"}, ""},
		{"less than none", LapseArg{For: -time.Minute, Step: "lapsed"}, ""},
		{"no time, to a step it lacks", LapseArg{For: 0, Step: "teleport"}, `"teleport"`},
		{"an hour, to a step it lacks", LapseArg{For: time.Hour, Step: "teleport"}, `"teleport"`},
		{"a lapse input over the limit", LapseArg{For: time.Hour, Step: "lapsed", InputSize: workflows.MaxRecordBytes}, "over the limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := start(t, Lapses, nil, nil)
			ctx := context.Background()
			_, err := PauseAs.Invoke(ctx, e.client, "l-1", c.arg)
			if c.refuse != "" {
				if !refusedAs(err, components.Invalid) || !strings.Contains(err.Error(), c.refuse) {
					t.Fatalf("pause: %v, want refused as invalid, naming %s", err, c.refuse)
				}
				if in, err := e.wf.Get(ctx, "l-1"); err != nil || in.Status != workflows.StatusNotStarted {
					t.Errorf("after the refusal: %+v, %v; want not started", in, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := e.timers.Settle(ctx); err != nil { // the clock is not moved: the timer is due
				t.Fatal(err)
			}
			in := waitFor(t, e, "l-1", "ended", status[Lapse](workflows.StatusEnded))
			if in.State.Outcome != "lapsed" {
				t.Errorf("outcome %q, want lapsed; history %+v", in.State.Outcome, in.History)
			}
		})
	}
}
