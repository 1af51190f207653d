package components_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/components"
)

// twice is a definition with one method: it doubles an int, refuses a
// negative one and panics on 13; In is a prefix its reply starts with.
func twice(t *testing.T) *components.MethodSet[string, string] {
	t.Helper()
	s := components.NewMethodSet[string, string](components.KindTimedAction, "twice")
	s.Add(components.NewMethod("twice", "double", func(prefix string, n int) (string, error) {
		switch {
		case n < 0:
			return "", components.NewError(components.Invalid, "%d is negative", n)
		case n == 13:
			panic("unlucky")
		}
		return prefix + strings.Repeat("x", 2*n), nil
	}))
	return s
}

// A method set runs its methods by name with the argument type checked and
// panics turned into errors, decodes JSON arguments, and refuses a
// second method of the same name.
func TestMethodSet(t *testing.T) {
	s := twice(t)
	if got := s.Methods(); len(got) != 1 || got[0] != "double" {
		t.Fatalf("methods %v", got)
	}
	m, err := s.Lookup("double")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string // case name
		arg     any    // the boxed argument
		want    string // the reply
		wantErr string // what the error says ("" for none)
	}{
		{"runs", 2, ">xxxx", ""},
		{"nil is the zero value", nil, ">", ""},
		{"wrong type", "two", "", "argument is string, want int: bad argument"},
		{"refusal", -1, "", "-1 is negative"},
		{"panic", 13, "", "twice.double panicked: unlucky"},
	}
	for _, tt := range tests {
		got, err := m.Run(">", tt.arg)
		if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: %q, %v; want %q, error %q", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
	if _, err := s.Lookup("triple"); !errors.Is(err, components.ErrUnknownMethod) {
		t.Errorf("unknown method: %v", err)
	}

	invoke := func(_ context.Context, _, method string, arg any) (any, error) {
		m, err := s.Lookup(method)
		if err != nil {
			return nil, err
		}
		return m.Run("", arg)
	}
	if b, err := s.InvokeJSON(context.Background(), "", "double", []byte("1"), invoke); err != nil || string(b) != `"xx"` {
		t.Errorf("InvokeJSON: %s, %v", b, err)
	}
	if _, err := s.InvokeJSON(context.Background(), "", "double", []byte(`"one"`), invoke); !errors.Is(err, components.ErrBadArgument) {
		t.Errorf("InvokeJSON of a string: %v, want ErrBadArgument", err)
	}

	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "defined twice") {
			t.Errorf("a second double: recovered %v, want a panic saying it is defined twice", r)
		}
	}()
	s.Add(components.NewMethod("twice", "double", func(string, int) (string, error) { return "", nil }))
}
