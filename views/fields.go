package views

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// kind is how a field's values are encoded in an index key.
type kind int

const (
	kindString kind = iota
	kindInt
	kindUint
	kindFloat
	kindBool
	kindTime
)

func (k kind) String() string {
	return [...]string{"a string", "an integer", "an unsigned integer", "a number", "a boolean (true or false)", "a time (RFC 3339)"}[k]
}

// field is a top-level field of a row type that a query may use, by its
// JSON name.
type field struct {
	name  string
	index []int
	kind  kind
}

var timeType = reflect.TypeFor[time.Time]()

// rowFields lists the indexable fields of row type t (a struct) by JSON
// name, and the names of the others with why they are not.
func rowFields(t reflect.Type) (map[string]*field, map[string]string, error) {
	if t.Kind() != reflect.Struct {
		return nil, nil, fmt.Errorf("a view's row must be a struct, not %s", t)
	}
	ok, not := make(map[string]*field), make(map[string]string)
	for _, sf := range reflect.VisibleFields(t) {
		if !sf.IsExported() || sf.Anonymous {
			continue
		}
		name := sf.Name
		if tag, has := sf.Tag.Lookup("json"); has {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		if _, taken := ok[name]; taken || throughPointer(t, sf.Index) {
			continue // shadowed, as encoding/json does; or nil in some rows
		}
		k, err := kindOf(sf.Type)
		if err != nil {
			not[name] = err.Error()
			continue
		}
		ok[name] = &field{name: name, index: sf.Index, kind: k}
	}
	return ok, not, nil
}

// throughPointer reports whether the field at index is promoted through
// an embedded pointer.
func throughPointer(t reflect.Type, index []int) bool {
	for _, i := range index[:len(index)-1] {
		t = t.Field(i).Type
		if t.Kind() == reflect.Pointer {
			return true
		}
	}
	return false
}

func kindOf(t reflect.Type) (kind, error) {
	if t == timeType {
		return kindTime, nil
	}
	switch t.Kind() {
	case reflect.String:
		return kindString, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return kindInt, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return kindUint, nil
	case reflect.Float32, reflect.Float64:
		return kindFloat, nil
	case reflect.Bool:
		return kindBool, nil
	}
	return 0, fmt.Errorf("its type %s cannot be indexed (a string, number, bool or time.Time can)", t)
}

// appendValue appends the encoding of f's value in row (a struct value).
func (f *field) appendValue(b []byte, row reflect.Value) []byte {
	v := row.FieldByIndex(f.index)
	switch f.kind {
	case kindString:
		return appendString(b, v.String())
	case kindInt:
		return appendInt(b, v.Int())
	case kindUint:
		return appendUint(b, v.Uint())
	case kindFloat:
		x := v.Float()
		if math.IsNaN(x) {
			x = math.Inf(-1) // NaN sorts first, as the lowest number
		}
		return appendFloat(b, x)
	case kindBool:
		return appendBool(b, v.Bool())
	default:
		return appendInt(b, v.Interface().(time.Time).UnixNano())
	}
}

// appendParam appends the encoding of a query parameter given as text
// for f; it fails when the text is not of f's type.
func (f *field) appendParam(b []byte, param, text string) ([]byte, error) {
	bad := func() ([]byte, error) {
		return nil, refuse(ErrBadParam, param, "%q is not %s", text, f.kind)
	}
	switch f.kind {
	case kindString:
		return appendString(b, text), nil
	case kindInt:
		i, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return bad()
		}
		return appendInt(b, i), nil
	case kindUint:
		u, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			return bad()
		}
		return appendUint(b, u), nil
	case kindFloat:
		x, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsNaN(x) {
			return bad()
		}
		return appendFloat(b, x), nil
	case kindBool:
		v, err := strconv.ParseBool(text)
		if err != nil {
			return bad()
		}
		return appendBool(b, v), nil
	default:
		t, err := time.Parse(time.RFC3339Nano, text)
		if err != nil {
			return bad()
		}
		return appendInt(b, t.UnixNano()), nil
	}
}
