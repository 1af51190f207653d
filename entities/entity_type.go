package entities

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/trellis-go/trellis/components"
)

// Type is the definition of a key-value entity: its component id, its empty
// state and its commands. It holds no running state, so one definition can
// be started in several services (or test servers) at once.
type Type[S any] struct {
	id    string
	empty func(entityID string) S

	mu       sync.Mutex
	commands map[string]*command[S]
}

// Define defines a key-value entity with a stable component id and the
// empty state of an entity that has never been written (or was deleted).
func Define[S any](componentID string, empty func(entityID string) S) *Type[S] {
	return &Type[S]{id: componentID, empty: empty, commands: make(map[string]*command[S])}
}

// ComponentID is the entity's component id.
func (t *Type[S]) ComponentID() string { return t.id }

// command is one command, with its types erased so that the entity actor
// can hold them all in one map.
type command[S any] struct {
	name string
	// run calls the handler: arg must be the command's argument type.
	run func(ctx context.Context, client *components.Client, entityID string, state S, arg any) (effect[S], error)
	// decode turns a JSON argument into the argument type.
	decode func([]byte) (any, error)
}

// effect is an Effect with its reply boxed.
type effect[S any] struct {
	kind    effectKind
	state   S
	reply   any
	message string
}

// Command adds a command named name (stable: it is stored in deferred
// calls) to the entity t and returns its typed handle. A second command
// with the same name panics: definitions are package-level and a clash is
// a programming error found at start-up.
func Command[S, A, R any](t *Type[S], name string, handler func(ctx *Ctx[S, R], state S, arg A) Effect[S, R]) components.EntityMethod[A, R] {
	cmd := &command[S]{
		name: name,
		run: func(ctx context.Context, client *components.Client, entityID string, state S, arg any) (eff effect[S], err error) {
			a, ok := arg.(A)
			if !ok && arg != nil {
				var want A
				return eff, fmt.Errorf("%s.%s: argument is %T, want %T: %w", t.id, name, arg, want, components.ErrBadArgument)
			}
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("%s.%s on %q panicked: %v", t.id, name, entityID, r)
				}
			}()
			e := handler(&Ctx[S, R]{ctx: ctx, entityID: entityID, client: client}, state, a)
			if e.kind == 0 {
				return eff, fmt.Errorf("%s.%s on %q returned no effect (the zero Effect)", t.id, name, entityID)
			}
			return effect[S]{kind: e.kind, state: e.state, reply: e.reply, message: e.message}, nil
		},
		decode: func(b []byte) (any, error) { return components.DecodeArgument[A](b) },
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, dup := t.commands[name]; dup {
		panic(fmt.Sprintf("entities: %s.%s: %v: the command is defined twice", t.id, name, components.ErrDuplicate))
	}
	t.commands[name] = cmd
	return components.NewEntityMethod[A, R](t.id, name)
}

func (t *Type[S]) command(name string) (*command[S], error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cmd, ok := t.commands[name]
	if !ok {
		return nil, fmt.Errorf("%s.%s: %w", t.id, name, components.ErrUnknownMethod)
	}
	return cmd, nil
}

func (t *Type[S]) methods() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	names := make([]string, 0, len(t.commands))
	for name := range t.commands {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// encodeReply is the JSON form of a reply for InvokeJSON.
func encodeReply(componentID, method string, reply any) ([]byte, error) {
	b, err := json.Marshal(reply)
	if err != nil {
		return nil, fmt.Errorf("%s.%s: encode the reply: %w", componentID, method, err)
	}
	return b, nil
}
