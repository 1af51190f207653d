package entityrun

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo is a command whose answer is its argument, after in.wait (when
// set) is closed; in.started, when set, is closed as it starts.
type echoIn struct{ started, wait chan struct{} }

var echoSet = func() *components.MethodSet[echoIn, string] {
	set := components.NewMethodSet[echoIn, string](components.KindKeyValueEntity, "echo")
	set.Add(components.NewMethod("echo", "say", func(in echoIn, s string) (string, error) {
		if in.started != nil {
			close(in.started)
		}
		if in.wait != nil {
			<-in.wait
		}
		return s, nil
	}))
	return set
}()

// TestLookup: a known method is found; an unknown one, or an empty entity
// id, is an error.
func TestLookup(t *testing.T) {
	if cmd, err := Lookup(echoSet, "e-1", "say"); err != nil || cmd.Name != "say" {
		t.Fatalf("Lookup = %v, %v", cmd, err)
	}
	if _, err := Lookup(echoSet, "e-1", "shout"); err == nil {
		t.Fatal("an unknown method was found")
	}
	if _, err := Lookup(echoSet, "", "say"); !errors.Is(err, components.ErrMissingEntityID) {
		t.Fatalf("empty entity id: %v, want ErrMissingEntityID", err)
	}
}

// TestAnswer: a command is run and answered; one whose caller gave up is
// answered with the context's error and not run.
func TestAnswer(t *testing.T) {
	cmd, _ := Lookup(echoSet, "e-1", "say")
	ran := false
	handle := func(env Envelope[echoIn, string]) (any, error) {
		ran = true
		out, err := env.Cmd.Run(echoIn{}, env.Arg)
		return out, err
	}
	reply := make(chan Outcome, 1)
	Answer(Envelope[echoIn, string]{Ctx: context.Background(), Cmd: cmd, Arg: "hi", Reply: reply}, handle)
	if out := <-reply; out.Value != "hi" || out.Err != nil || !ran {
		t.Fatalf("answer = %+v (ran %v), want hi", out, ran)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran = false
	Answer(Envelope[echoIn, string]{Ctx: ctx, Cmd: cmd, Arg: "hi", Reply: reply}, handle)
	if out := <-reply; !errors.Is(out.Err, context.Canceled) || ran {
		t.Fatalf("answer = %+v (ran %v), want context.Canceled, not run", out, ran)
	}
}

// batcher is an entity actor that runs the commands queued behind one
// together, and notes how many it ran at a time.
type batcher struct {
	queue   Queue[echoIn, string]
	in      echoIn
	mu      *sync.Mutex
	batches *[]int
}

func (b *batcher) Receive(ctx *runtime.Context[Envelope[echoIn, string]], env Envelope[echoIn, string]) {
	if b.queue.Take(ctx, env, b.run) {
		return
	}
	b.run([]Envelope[echoIn, string]{env})
}

func (b *batcher) run(envs []Envelope[echoIn, string]) {
	b.mu.Lock()
	*b.batches = append(*b.batches, len(envs))
	b.mu.Unlock()
	for _, env := range envs {
		in := b.in
		b.in = echoIn{} // only the first command waits
		Answer(env, func(env Envelope[echoIn, string]) (any, error) { return env.Cmd.Run(in, env.Arg) })
	}
}

// TestRunAndQueue: Run answers a command on the entity's actor; the
// commands that queue behind a busy one are taken together, in order, and
// each gets its own answer; a caller whose context ends stops waiting.
func TestRunAndQueue(t *testing.T) {
	sys := testenv.System(t, t.Name())
	in := echoIn{started: make(chan struct{}), wait: make(chan struct{})}
	var mu sync.Mutex
	var batches []int
	sh, err := StartSharding(sys, "echo", nil, 0, func(string) runtime.Behavior[Envelope[echoIn, string]] {
		return &batcher{in: in, mu: &mu, batches: &batches}
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd, _ := Lookup(echoSet, "e-1", "say")
	first := make(chan Outcome, 1)
	go func() {
		v, err := Run(context.Background(), sh, "echo", "e-1", cmd, "first")
		first <- Outcome{Value: v, Err: err}
	}()
	<-in.started
	// Queued behind the first, which waits.
	replies := make([]chan Outcome, 3)
	for i := range replies {
		replies[i] = make(chan Outcome, 1)
		sh.Run("e-1", Envelope[echoIn, string]{Ctx: context.Background(), Cmd: cmd, Arg: strconv.Itoa(i), Reply: replies[i]})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := Run(ctx, sh, "echo", "e-1", cmd, "late"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a caller whose context ends: %v, want DeadlineExceeded", err)
	}
	close(in.wait)
	if out := testenv.Recv(t, first, 5*time.Second); out.Value != "first" || out.Err != nil {
		t.Fatalf("first = %+v", out)
	}
	for i, reply := range replies {
		if out := testenv.Recv(t, reply, 5*time.Second); out.Value != strconv.Itoa(i) || out.Err != nil {
			t.Fatalf("queued %d = %+v", i, out)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// The first alone, then the three queued and the late one (answered
	// with its context's error) together.
	if len(batches) != 2 || batches[0] != 1 || batches[1] != 4 {
		t.Fatalf("batches = %v, want [1 4]", batches)
	}
}
