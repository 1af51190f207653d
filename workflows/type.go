package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
)

// Type is the definition of a workflow: its component id, its empty state,
// its commands and its steps, and its settings. It holds no running state,
// so one definition can be started in several services (or test servers)
// at once.
type Type[S any] struct {
	id       string
	empty    func(workflowID string) S
	settings settings

	mu       sync.Mutex
	commands []func(et *entities.Type[record], r *Running[S])
	names    map[string]bool // the commands' names
	steps    map[string]*stepDef[S]
}

// Define defines a workflow with a stable component id (it names the
// stored records and the commands' calls), the state of an instance that
// has not started, and its settings (DefaultStepTimeout and the default
// retries when none are given).
func Define[S any](componentID string, empty func(workflowID string) S, opts ...Option) *Type[S] {
	t := &Type[S]{id: componentID, empty: empty, settings: defaultSettings(),
		names: make(map[string]bool), steps: make(map[string]*stepDef[S])}
	for _, o := range opts {
		o(&t.settings, true)
	}
	return t
}

// ComponentID is the workflow's component id.
func (t *Type[S]) ComponentID() string { return t.id }

// Steps are the names of the workflow's steps, sorted.
func (t *Type[S]) Steps() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	names := make([]string, 0, len(t.steps))
	for name := range t.steps {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// step is the step named name, or nil.
func (t *Type[S]) step(name string) *stepDef[S] {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.steps[name]
}

// decode is the state stored in rec; an instance that has none has the
// empty state.
func (t *Type[S]) decode(workflowID string, rec record) (S, error) {
	state := t.empty(workflowID)
	if len(rec.State) == 0 {
		return state, nil
	}
	if err := json.Unmarshal(rec.State, &state); err != nil {
		return state, fmt.Errorf("decode the state of workflow %s/%s: %w", t.id, workflowID, err)
	}
	return state, nil
}

// Command adds a command named name (stable: it is stored in deferred
// calls) to the workflow t and returns its typed handle, invoked through
// the component client as an entity command is:
//
//	transfer, err := Begin.Invoke(ctx, client, "t-1", req)
//
// A handler is a pure function of (state, argument) → effect, run on the
// owner of the workflow's shard one command at a time, as an entity's. A
// name that starts with "trellis." is reserved; a second command of one
// name panics.
func Command[S, A, R any](t *Type[S], name string, handler func(ctx *Ctx[S, R], state S, arg A) Effect[S, R]) components.EntityMethod[A, R] {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(name) >= len(internalPrefix) && name[:len(internalPrefix)] == internalPrefix {
		panic(fmt.Sprintf("workflow %s: command %q: names starting with %q are the platform's", t.id, name, internalPrefix))
	}
	if t.names[name] {
		panic(fmt.Sprintf("workflow %s.%s: %v: the command is defined twice", t.id, name, components.ErrDuplicate))
	}
	t.names[name] = true
	t.commands = append(t.commands, func(et *entities.Type[record], r *Running[S]) {
		entities.Command(et, name, func(ectx *entities.Ctx[record, R], rec record, arg A) entities.Effect[record, R] {
			return runCommand(r, ectx, rec, func(ctx *Ctx[S, R], state S) Effect[S, R] { return handler(ctx, state, arg) })
		})
	})
	return components.NewEntityMethod[A, R](t.id, name)
}

// stepDef is one step, its input type erased.
type stepDef[S any] struct {
	name     string
	settings settings
	run      func(ctx *StepCtx[S], state S, input json.RawMessage) (StepEffect[S], error)
}

// Step adds a step named name (stable: it is stored in running instances)
// to the workflow t. Its handler may do I/O — call entities through
// ctx.Client() with ctx.Context(), call out over HTTP — and returns a step
// effect. It runs on the owner of the workflow's shard, outside the
// commands' path, and again after a crash that came before its effect was
// committed: see the package documentation for what that means for the
// calls it makes. Options set its timeout and retries, over the
// workflow's. A second step of one name panics.
func Step[S, I any](t *Type[S], name string, handler func(ctx *StepCtx[S], state S, input I) StepEffect[S], opts ...Option) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, dup := t.steps[name]; dup {
		panic(fmt.Sprintf("workflow %s: step %q: %v: the step is defined twice", t.id, name, components.ErrDuplicate))
	}
	s := t.settings
	for _, o := range opts {
		o(&s, false)
	}
	t.steps[name] = &stepDef[S]{name: name, settings: s,
		run: func(ctx *StepCtx[S], state S, raw json.RawMessage) (StepEffect[S], error) {
			var input I
			if len(raw) > 0 && string(raw) != "null" { // null leaves input zero: no decoder needed
				if err := json.Unmarshal(raw, &input); err != nil {
					return StepEffect[S]{}, fmt.Errorf("decode the input of step %q: %w", name, err)
				}
			}
			return handler(ctx, state, input), nil
		}}
}

// internalPrefix starts the names of the platform's own commands.
const internalPrefix = "trellis."

// settings are a workflow's or a step's timeout and retries.
type settings struct {
	stepTimeout time.Duration
	maxRetries  int
	backoff     time.Duration
	maxBackoff  time.Duration
	failover    *failover
	timeout     time.Duration // the workflow's; only Define takes it
	onTimeout   *failover
}

type failover struct {
	step  string
	input any
}

// Defaults of a workflow's settings.
const (
	// DefaultStepTimeout bounds one run of a step, as in the Akka SDK.
	DefaultStepTimeout = 5 * time.Second
	// DefaultMaxRetries is how many times a failed step runs again
	// before the workflow fails over (or fails).
	DefaultMaxRetries = 5
	// DefaultBackoff is the wait before a step's first retry, doubled for
	// each retry after, up to DefaultMaxBackoff.
	DefaultBackoff    = 200 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
)

func defaultSettings() settings {
	return settings{stepTimeout: DefaultStepTimeout, maxRetries: DefaultMaxRetries, backoff: DefaultBackoff, maxBackoff: DefaultMaxBackoff}
}

// retryAfter is the wait before the retry that follows failed attempt n
// (from 1).
func (s settings) retryAfter(n int) time.Duration {
	d := s.backoff
	for i := 1; i < n && d < s.maxBackoff; i++ {
		d *= 2
	}
	return min(d, s.maxBackoff)
}

// Option sets a workflow's defaults (given to Define) or one step's (given
// to Step).
type Option func(s *settings, workflow bool)

// StepTimeout bounds one run of a step: past it, the run counts as failed
// (and its context is cancelled).
func StepTimeout(d time.Duration) Option {
	return func(s *settings, _ bool) { s.stepTimeout = d }
}

// Retries sets how many times a failed step runs again (0: never), the
// wait before the first retry, and the bound the wait doubles up to.
func Retries(maxRetries int, backoff, maxBackoff time.Duration) Option {
	return func(s *settings, _ bool) {
		s.maxRetries, s.backoff, s.maxBackoff = maxRetries, backoff, max(backoff, maxBackoff)
	}
}

// FailoverTo makes a step that ran out of retries go to step with input
// (typically a compensation) rather than fail the workflow.
func FailoverTo(step string, input any) Option {
	return func(s *settings, _ bool) { s.failover = &failover{step: step, input: input} }
}

// Timeout bounds the whole workflow, from its first transition: past it,
// the workflow goes to step with input, or fails when step is "". Only
// Define takes it.
func Timeout(d time.Duration, step string, input any) Option {
	return func(s *settings, workflow bool) {
		if !workflow {
			panic("workflows.Timeout is a workflow's setting: give it to Define, not to Step")
		}
		s.timeout = d
		if step != "" {
			s.onTimeout = &failover{step: step, input: input}
		}
	}
}
