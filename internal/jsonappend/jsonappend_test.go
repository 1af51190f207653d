package jsonappend

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// strings are the cases of String, each against json.Marshal.
var strings = []string{
	"", "plain", `q"uote`, `back\slash`, "tab\there", "nl\ncr\r", "\b\f", "\x00\x01\x1f\x7f",
	"<a href='x'>&amp;</a>", "é ü 中文 🎉", "line\u2028sep\u2029para", "bad\xffutf8\xc3", "\xe2\x80",
}

func TestString(t *testing.T) {
	for _, s := range strings {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := String([]byte("x"), s); !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Errorf("String(%q) = %s, want x%s", s, got, want)
		}
	}
}

func FuzzString(f *testing.F) {
	for _, s := range strings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := String(nil, s); !bytes.Equal(got, want) {
			t.Errorf("String(%q) = %s, want %s", s, got, want)
		}
	})
}

func TestTime(t *testing.T) {
	east := time.FixedZone("east", 5*3600+30*60)
	far := time.FixedZone("far", 25*3600)
	cases := []struct {
		t  time.Time
		ok bool
	}{
		{time.Date(2026, 11, 28, 18, 31, 54, 123456789, time.UTC), true},
		{time.Date(2026, 11, 28, 18, 31, 54, 0, east), true},
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), true},
		{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{time.Date(2026, 1, 1, 0, 0, 0, 0, far), false},
		{time.Now(), true}, // with a monotonic reading, which is not written
	}
	for _, c := range cases {
		want, err := json.Marshal(c.t)
		got, ok := Time(nil, c.t)
		if ok != c.ok || ok != (err == nil) {
			t.Errorf("Time(%v): ok %v, want %v (json.Marshal's error: %v)", c.t, ok, c.ok, err)
			continue
		}
		if ok && !bytes.Equal(got, want) {
			t.Errorf("Time(%v) = %s, want %s", c.t, got, want)
		}
	}
}

func TestPlain(t *testing.T) {
	cases := []struct {
		raw   string
		plain bool
	}{
		{`{"n":3,"name":"a b"}`, true},
		{`"say \"hi\" \\"`, true},
		{`[1,2,{"x":null}]`, true},
		{`"é"`, true},
		{`{"n": 3}`, false},
		{"[1,\n2]", false},
		{`"a<b"`, false},
		{`"a&b"`, false},
		{"\"\u2028\"", false},
		{`"\" }"`, true},
	}
	for _, c := range cases {
		if got := Plain([]byte(c.raw)); got != c.plain {
			t.Errorf("Plain(%s) = %v, want %v", c.raw, got, c.plain)
		}
		if !c.plain {
			continue
		}
		// What Plain passes, json.Marshal copies as it is.
		out, err := json.Marshal(json.RawMessage(c.raw))
		if err != nil || string(out) != c.raw {
			t.Errorf("json.Marshal(%s) = %s, %v: Plain passed what it changes", c.raw, out, err)
		}
	}
}
