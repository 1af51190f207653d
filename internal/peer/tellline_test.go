package peer

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestTellLineMatchesJSON: appendTellLine writes what an encoding/json
// Encoder writes, byte for byte, or declines; parseTellLine reads back
// what either wrote, and reads other JSON (reordered fields, spaces,
// escapes) as encoding/json does; what JSON refuses it refuses.
func TestTellLineMatchesJSON(t *testing.T) {
	lines := []tellLine{
		{Seq: 1, To: "a", Msg: []byte("1"), Sig: "c2ln"},
		{Seq: 0, To: "", Msg: nil, Sig: ""},
		{Seq: 18446744073709551615, To: "user/pc-1", Msg: []byte{}, Sig: "AbC-_9"},
		{Seq: 7, To: `needs "escape"`, Msg: []byte{0, 255, 10}, Sig: "s"},
		{Seq: 7, To: "html<&>", Msg: []byte("x"), Sig: "s"},
		{Seq: 7, To: "ünïcode", Msg: []byte("x"), Sig: "s"},
		{Seq: 7, To: "tab\there", Msg: []byte("x"), Sig: "s"},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		to := make([]byte, rng.IntN(12))
		for i := range to {
			to[i] = byte(0x20 + rng.IntN(0x60))
		}
		msg := make([]byte, rng.IntN(40))
		for i := range msg {
			msg[i] = byte(rng.IntN(256))
		}
		lines = append(lines, tellLine{Seq: rng.Uint64() >> rng.IntN(64), To: string(to), Msg: msg, Sig: string(to)})
	}
	plain := 0
	for _, line := range lines {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(&line); err != nil {
			t.Fatal(err)
		}
		got, ok := appendTellLine(nil, line.Seq, line.To, line.Msg, []byte(line.Sig))
		if ok {
			plain++
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("appendTellLine wrote %q, encoding/json %q", got, want.Bytes())
			}
		}
		var back tellLine
		sig, err := parseTellLine(bytes.TrimSuffix(want.Bytes(), []byte("\n")), &back, "")
		if err != nil {
			t.Fatalf("parse %q: %v", want.Bytes(), err)
		}
		if string(sig) != line.Sig {
			t.Fatalf("parsed signature %q from %q, wrote %q", sig, want.Bytes(), line.Sig)
		}
		back.Sig = line.Sig
		if !reflect.DeepEqual(back, line) && !(len(back.Msg) == 0 && len(line.Msg) == 0 && back.Seq == line.Seq && back.To == line.To) {
			t.Fatalf("parsed %+v from %q, wrote %+v", back, want.Bytes(), line)
		}
	}
	if plain < len(lines)/2 {
		t.Fatalf("only %d of %d lines written without encoding/json", plain, len(lines))
	}
	for _, data := range []string{
		` {"seq":1,"to":"a","msg":"MQ==","sig":"s"}`,
		`{"sig":"s","msg":"MQ==","to":"a","seq":1}`,
		`{"seq":1,"to":"\u0061","msg":"MQ==","sig":"s"}`,
	} {
		var fast, slow tellLine
		sig, errFast := parseTellLine([]byte(data), &fast, "a")
		errSlow := json.Unmarshal([]byte(data), &slow)
		fast.Sig = string(sig)
		if errFast != nil || errSlow != nil || !reflect.DeepEqual(fast, slow) {
			t.Errorf("%s: parsed %+v (%v), encoding/json %+v (%v)", data, fast, errFast, slow, errSlow)
		}
	}
	for _, data := range []string{
		`{"seq":01,"to":"a","msg":"MQ==","sig":"s"}`,
		`{"seq":1,"to":"a","msg":"M!==","sig":"s"}`,
		`{"seq":1,"to":"a","msg":"MQ==","sig":"s"}x`,
		`{"seq":1,"to":"a","msg":"MQ==","sig":"s"`,
		`{"seq":-1,"to":"a","msg":"MQ==","sig":"s"}`,
	} {
		var line tellLine
		if _, err := parseTellLine([]byte(data), &line, ""); err == nil {
			t.Errorf("%s: parsed as %+v", data, line)
		}
	}
}

// FuzzTellLine: whatever the bytes, parseTellLine gives json.Unmarshal's
// line (its signature apart) and error, and nothing panics.
func FuzzTellLine(f *testing.F) {
	f.Add([]byte(`{"seq":1,"to":"a","msg":"MQ==","sig":"s"}`))
	f.Add([]byte(`{"seq":2,"to":"user/pc-1","msg":null}`))
	f.Add([]byte(`{"seq":3,"to":"a","msg":""}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got, want tellLine
		sig, err := parseTellLine(data, &got, "a")
		wantErr := json.Unmarshal(data, &want)
		if err == nil {
			got.Sig = string(sig)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(err, wantErr) {
			t.Fatalf("%q: parsed %+v (%v), encoding/json %+v (%v)", data, got, err, want, wantErr)
		}
	})
}
