package api

import (
	"encoding/json"
	"reflect"
	"strings"
)

// refusedField finds the field of body whose value t's decode refused
// with a custom unmarshaler's error (a time that does not parse, say),
// which encoding/json returns without naming the field: it decodes the
// body's objects field by field along t. It returns "" when no one field
// is to blame.
func refusedField(t reflect.Type, body []byte) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return ""
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return ""
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name := jsonName(f)
		raw, ok := fields[name]
		if !ok || name == "" {
			continue
		}
		if json.Unmarshal(raw, reflect.New(f.Type).Interface()) == nil {
			continue
		}
		if inner := refusedField(f.Type, raw); inner != "" {
			return name + "." + inner
		}
		return name
	}
	return ""
}

// jsonName is the name f takes in JSON; "" when it takes none.
func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch name {
	case "-":
		return ""
	case "":
		return f.Name
	}
	return name
}
