package components

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
)

// Method is one method of a component definition with its argument type
// erased, so that a definition holds all its methods in one [MethodSet].
// In is what the component kind hands every call (an entity's state and
// id, a timed action's context), Out what the call gives back (an effect).
// Packages entities and timedactions make them; users never do.
type Method[In, Out any] struct {
	// Name is the method's stable name.
	Name string
	// Run calls the handler. arg must be of the method's argument type (nil
	// stands for its zero value), else the error wraps ErrBadArgument; a
	// panic in the handler is an error.
	Run func(in In, arg any) (Out, error)
	// Decode turns a JSON argument into the method's argument type, boxed
	// for Run; see DecodeArgument.
	Decode func(arg []byte) (any, error)
}

// NewMethod erases the argument type A of handler, the method name of
// component componentID.
func NewMethod[A, In, Out any](componentID, name string, handler func(in In, arg A) (Out, error)) Method[In, Out] {
	return Method[In, Out]{
		Name: name,
		Run: func(in In, arg any) (out Out, err error) {
			a, ok := arg.(A)
			if !ok && arg != nil {
				var want A
				return out, fmt.Errorf("%s.%s: argument is %T, want %T: %w", componentID, name, arg, want, ErrBadArgument)
			}
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("%s.%s panicked: %v", componentID, name, r)
				}
			}()
			return handler(in, a)
		},
		Decode: func(b []byte) (any, error) { return DecodeArgument[A](b) },
	}
}

// MethodSet is a component definition: its kind, its stable id and its
// methods by stable name. Package entities and package timedactions build
// their definitions on it, so that registration, typed methods and invoke
// by name work one way for every kind. It is safe for concurrent use.
type MethodSet[In, Out any] struct {
	kind Kind
	id   string

	mu     sync.Mutex
	byName map[string]*Method[In, Out]
}

// NewMethodSet makes the empty definition of a component of kind kind.
func NewMethodSet[In, Out any](kind Kind, componentID string) *MethodSet[In, Out] {
	return &MethodSet[In, Out]{kind: kind, id: componentID, byName: make(map[string]*Method[In, Out])}
}

// ComponentID is the component's id.
func (s *MethodSet[In, Out]) ComponentID() string { return s.id }

// Kind is the component's kind.
func (s *MethodSet[In, Out]) Kind() Kind { return s.kind }

// Add adds m. A second method with the same name panics: definitions are
// package-level, and a clash is a programming error found at start-up.
func (s *MethodSet[In, Out]) Add(m Method[In, Out]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.byName[m.Name]; dup {
		panic(fmt.Sprintf("%s %s.%s: %v: the method is defined twice", s.kind, s.id, m.Name, ErrDuplicate))
	}
	s.byName[m.Name] = &m
}

// Lookup returns the method named name, or an error wrapping
// ErrUnknownMethod.
func (s *MethodSet[In, Out]) Lookup(name string) (*Method[In, Out], error) {
	s.mu.Lock()
	m, ok := s.byName[name]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%s.%s: %w", s.id, name, ErrUnknownMethod)
	}
	return m, nil
}

// Methods are the method names, sorted.
func (s *MethodSet[In, Out]) Methods() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.byName))
	for name := range s.byName {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Register adds running, the started component of this definition, to
// reg; the error says which component could not start.
func (s *MethodSet[In, Out]) Register(reg *Registry, running Component) error {
	if err := reg.Register(running); err != nil {
		return fmt.Errorf("start %s %q: %w", s.kind, s.id, err)
	}
	return nil
}

// InvokeJSON is Component.InvokeJSON for a component of this definition
// whose Invoke is invoke: the argument is decoded into the method's
// argument type, the call made, and the reply encoded.
func (s *MethodSet[In, Out]) InvokeJSON(ctx context.Context, entityID, method string, arg []byte,
	invoke func(ctx context.Context, entityID, method string, arg any) (any, error)) ([]byte, error) {
	m, err := s.Lookup(method)
	if err != nil {
		return nil, err
	}
	a, err := m.Decode(arg)
	if err != nil {
		return nil, fmt.Errorf("%s.%s: %w", s.id, method, err)
	}
	reply, err := invoke(ctx, entityID, method, a)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(reply)
	if err != nil {
		return nil, fmt.Errorf("%s.%s: encode the reply: %w", s.id, method, err)
	}
	return b, nil
}
