// Package entityrun is what the actors of key-value entities (package
// entities) and of event-sourced entities (package eventsourced) share:
// the envelope a command travels in to its entity's actor, running it
// there and waiting for its answer, and taking the commands queued behind
// one to run them together.
package entityrun

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/runtime"
)

// MaxBatch bounds the commands an entity runs together, with one write.
const MaxBatch = 64

// Outcome is a command's answer: its reply, or its error.
type Outcome struct {
	Value any
	Err   error
}

// Envelope is one command for an entity's actor: the caller's context,
// the command, its argument and where its answer goes.
type Envelope[In, Out any] struct {
	Ctx   context.Context
	Cmd   *components.Method[In, Out]
	Arg   any
	Reply chan<- Outcome // capacity 1: the actor never waits on the caller
}

// StartSharding starts the sharding of componentID's entity actors on
// sys, each made by create, run by d and stopped after passivateAfter
// without a command. It keeps every entity on this system: a command is
// routed to its shard's owner before it reaches the sharding.
func StartSharding[In, Out any](sys *runtime.System, componentID string, d *runtime.Dispatcher, passivateAfter time.Duration,
	create func(entityID string) runtime.Behavior[Envelope[In, Out]]) (*runtime.Sharding[Envelope[In, Out]], error) {
	return runtime.InitSharding(sys, runtime.Entity[Envelope[In, Out]]{
		Key:            runtime.NewEntityTypeKey[Envelope[In, Out]](componentID),
		Create:         create,
		PassivateAfter: passivateAfter,
		Dispatcher:     d,
		Local:          true,
	})
}

// Lookup is the command method of set, for entity entityID: an unknown
// method or an empty entity id is an error.
func Lookup[In, Out any](set *components.MethodSet[In, Out], entityID, method string) (*components.Method[In, Out], error) {
	cmd, err := set.Lookup(method)
	if err != nil {
		return nil, err
	}
	if entityID == "" {
		return nil, fmt.Errorf("%s.%s: %w", set.ComponentID(), method, components.ErrMissingEntityID)
	}
	return cmd, nil
}

// Run sends cmd with arg to the actor of entity entityID through sh and
// waits for its answer, or for ctx's end. An idle entity runs it on this
// goroutine (runtime.Sharding.Run): a handler does no I/O of its own, and
// the store's calls end with ctx.
func Run[In, Out any](ctx context.Context, sh *runtime.Sharding[Envelope[In, Out]], componentID, entityID string,
	cmd *components.Method[In, Out], arg any) (any, error) {
	reply := make(chan Outcome, 1)
	sh.Run(entityID, Envelope[In, Out]{Ctx: ctx, Cmd: cmd, Arg: arg, Reply: reply})
	select {
	case out := <-reply: // run on this goroutine, or quick: the answer, even if ctx ended meanwhile
		return out.Value, out.Err
	default:
	}
	select {
	case out := <-reply:
		return out.Value, out.Err
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", Op(componentID, cmd.Name, entityID), ctx.Err())
	}
}

// Answer runs env's command with handle and sends its answer. A command
// whose caller gave up while it waited is not run: its answer is the
// context's error.
func Answer[In, Out any](env Envelope[In, Out], handle func(Envelope[In, Out]) (any, error)) {
	if err := env.Ctx.Err(); err != nil {
		env.Reply <- Outcome{Err: err}
		return
	}
	v, err := handle(env)
	env.Reply <- Outcome{Value: v, Err: err}
}

// Op names command name on entity entityID of componentID, in errors.
func Op(componentID, name, entityID string) string {
	return fmt.Sprintf("%s.%s on %q", componentID, name, entityID)
}

// Queue is an actor's room for the commands queued behind the one it
// receives, reused from one command to the next. The zero Queue is
// ready.
type Queue[In, Out any] struct {
	taken []Envelope[In, Out]
}

// Take takes up to MaxBatch-1 of the commands queued behind env (ctx is
// the actor's) and, when there are any, runs env and them, in order,
// with run and returns true. It holds no caller's context once run
// returns.
func (q *Queue[In, Out]) Take(ctx *runtime.Context[Envelope[In, Out]], env Envelope[In, Out], run func([]Envelope[In, Out])) bool {
	rest := ctx.TakeQueued(MaxBatch-1, q.taken[:0])
	if len(rest) == 0 {
		return false
	}
	envs := slices.Insert(rest, 0, env)
	run(envs)
	clear(envs)
	q.taken = envs[:0]
	return true
}
