package api

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// checkShape compares a body, already known to be one valid JSON value,
// with the Go type it decodes into, and names every unknown field, every
// field given twice, and every required field that is missing or null.
// Values whose JSON kind does not fit the type are skipped: the decode that
// follows reports them as type errors.
//
// It scans the bytes once without building values, so the happy path costs
// no allocation beyond the errors it finds: it runs on every request.
func checkShape(t reflect.Type, body []byte) []FieldError {
	var path [8]pathElem // room for the usual nesting, without allocating
	s := shapeScanner{b: body, path: path[:0]}
	s.value(t, 0)
	return s.errs
}

type shapeScanner struct {
	b    []byte
	i    int
	path []pathElem // where the scanner is; rendered only for an error
	errs []FieldError
}

// pathElem is an object key (raw, as in the body) or an array index.
type pathElem struct {
	key   []byte
	index int // -1 for a key
}

// value scans the value at s.i against t (nil: anything) and reports
// whether it is null.
func (s *shapeScanner) value(t reflect.Type, depth int) (null bool) {
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (opaque(t) || depth > maxDepth) {
		if depth > maxDepth {
			s.fail("is nested more than " + strconv.Itoa(maxDepth) + " levels deep")
		}
		t = nil
	}
	switch c := s.b[s.i]; {
	case c == '{' && t != nil && t.Kind() == reflect.Struct:
		s.object(planOf(t), depth)
	case c == '{' && t != nil && t.Kind() == reflect.Map:
		s.i++
		for s.nextMember() {
			key := s.key()
			s.path = append(s.path, pathElem{key: key, index: -1})
			s.value(t.Elem(), depth+1)
			s.path = s.path[:len(s.path)-1]
		}
	case c == '[' && t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() != reflect.Uint8:
		s.i++
		for n := 0; s.nextElem(n); n++ {
			s.path = append(s.path, pathElem{index: n})
			s.value(t.Elem(), depth+1)
			s.path = s.path[:len(s.path)-1]
		}
	case c == 'n':
		s.i += len("null")
		return true
	default:
		s.skip()
	}
	return false
}

// object scans an object against a struct plan.
func (s *shapeScanner) object(plan *structPlan, depth int) {
	s.i++
	var seenSmall uint64 // fields seen, for the usual ≤ 64 fields
	var seenLarge []bool
	if len(plan.fields) > 64 {
		seenLarge = make([]bool, len(plan.fields))
	}
	seen := func(n int) bool {
		if seenLarge != nil {
			return seenLarge[n]
		}
		return seenSmall&(1<<n) != 0
	}
	var nulls []int // fields given as null
	for s.nextMember() {
		key := s.key()
		f, ok := plan.byName[string(key)]
		s.path = append(s.path, pathElem{key: key, index: -1})
		switch {
		case !ok:
			s.fail("is not a known field")
			s.skip()
		case seen(f.index):
			s.fail("is given more than once")
			s.skip()
		default:
			if seenLarge != nil {
				seenLarge[f.index] = true
			} else {
				seenSmall |= 1 << f.index
			}
			if s.value(f.typ, depth+1) && !f.nullable {
				nulls = append(nulls, f.index)
			}
		}
		s.path = s.path[:len(s.path)-1]
	}
	for n := range plan.fields {
		f := &plan.fields[n]
		if !f.required {
			continue
		}
		s.path = append(s.path, pathElem{key: []byte(f.name), index: -1})
		switch {
		case !seen(n):
			s.fail("is required")
		case containsInt(nulls, n):
			s.fail("is required and must not be null")
		}
		s.path = s.path[:len(s.path)-1]
	}
}

func containsInt(s []int, n int) bool {
	for _, v := range s {
		if v == n {
			return true
		}
	}
	return false
}

// nextMember moves to the next key of an object, past '{' or ',', and
// reports whether there is one; at the end it moves past '}'.
func (s *shapeScanner) nextMember() bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ',' {
		s.i++
		s.ws()
	}
	if s.i >= len(s.b) || s.b[s.i] == '}' {
		s.i++
		return false
	}
	return true
}

// nextElem is nextMember for arrays.
func (s *shapeScanner) nextElem(n int) bool {
	s.ws()
	if n > 0 && s.i < len(s.b) && s.b[s.i] == ',' {
		s.i++
		s.ws()
	}
	if s.i >= len(s.b) || s.b[s.i] == ']' {
		s.i++
		return false
	}
	return true
}

// key reads an object key and the ':' after it; it returns the key's
// bytes, unescaped (which allocates only when the key has escapes).
func (s *shapeScanner) key() []byte {
	start := s.i
	s.skipString()
	raw := s.b[start:s.i]
	s.ws()
	s.i++ // ':'
	inner := raw[1 : len(raw)-1]
	if !containsByte(inner, '\\') {
		return inner
	}
	var k string
	if json.Unmarshal(raw, &k) != nil { // cannot fail: the body is valid
		return inner
	}
	return []byte(k)
}

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// skip moves past one value of any kind, iteratively, so that no nesting
// can exhaust the stack.
func (s *shapeScanner) skip() {
	s.ws()
	depth := 0
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '"':
			s.skipString()
		case '{', '[':
			depth++
			s.i++
		case '}', ']':
			depth--
			s.i++
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return
			}
			s.i++
		default: // a number or a literal
			s.i++
		}
		if depth == 0 && (s.i >= len(s.b) || isDelim(s.b[s.i])) {
			return
		}
	}
}

func isDelim(c byte) bool {
	return c == ',' || c == '}' || c == ']' || c == ':' || c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

// skipString moves past the string starting at s.i.
func (s *shapeScanner) skipString() {
	s.i++ // opening quote
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			s.i += 2
		case '"':
			s.i++
			return
		default:
			s.i++
		}
	}
}

func (s *shapeScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// fail records an error for the field at the current path.
func (s *shapeScanner) fail(message string) {
	s.errs = append(s.errs, FieldError{Field: renderPath(s.path), Message: message})
}

// renderPath renders a path as `a.b[2].c`.
func renderPath(path []pathElem) string {
	var b strings.Builder
	for _, e := range path {
		if e.index >= 0 {
			b.WriteString("[" + strconv.Itoa(e.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(e.key)
	}
	return b.String()
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// opaque reports whether t decodes itself (time.Time, uuid.UUID, ...):
// its JSON is its own business.
func opaque(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshaler) || pt.Implements(jsonUnmarshaler) ||
		t.Implements(textUnmarshaler) || pt.Implements(textUnmarshaler)
}

// structPlan is what the shape check needs to know of a struct type: its
// JSON fields as encoding/json sees them (embedded structs flattened).
type structPlan struct {
	fields []fieldPlan // in declaration order
	byName map[string]*fieldPlan
}

type fieldPlan struct {
	index    int // in structPlan.fields
	name     string
	typ      reflect.Type
	required bool // no omitempty/omitzero in its json tag
	nullable bool // a pointer or interface: null is a value
}

var plans sync.Map // reflect.Type → *structPlan

func planOf(t reflect.Type) *structPlan {
	if p, ok := plans.Load(t); ok {
		return p.(*structPlan)
	}
	p := &structPlan{byName: make(map[string]*fieldPlan)}
	addFields(p, t)
	for i := range p.fields {
		p.fields[i].index = i
		p.byName[p.fields[i].name] = &p.fields[i]
	}
	actual, _ := plans.LoadOrStore(t, p)
	return actual.(*structPlan)
}

// addFields adds t's JSON fields to p, flattening untagged embedded
// structs as encoding/json does.
func addFields(p *structPlan, t reflect.Type) {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if sf.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				addFields(p, et)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		omit := false
		for o := range strings.SplitSeq(opts, ",") {
			if o == "omitempty" || o == "omitzero" {
				omit = true
			}
		}
		k := ft.Kind()
		p.fields = append(p.fields, fieldPlan{
			name:     name,
			typ:      ft,
			required: !omit,
			nullable: k == reflect.Pointer || k == reflect.Interface,
		})
	}
}

func typeOf[T any]() reflect.Type { return reflect.TypeFor[T]() }
