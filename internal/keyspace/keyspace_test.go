package keyspace_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// TestMain stops the throwaway Redis Cluster a test started.
func TestMain(m *testing.M) { os.Exit(testenv.Servers(m).Run()) }

func TestCheckPrefix(t *testing.T) {
	for _, tc := range []struct {
		// prefix is checked.
		prefix string
		// wantIn is in the error; "" when the prefix is good.
		wantIn string
	}{
		{"trellis", ""},
		{"my-app.v2_x:blue", ""},
		{strings.Repeat("a", 64), ""},
		{"", "must not be empty"},
		{strings.Repeat("a", 65), "at most 64"},
		{"{trellis}", "in one slot"},
		{"a}b", "in one slot"},
		{"a*", "byte 1"},
		{"café", "'é' at byte 3"},
		{"a b", "byte 1"},
		{"trellis:", "ends in ':'"},
	} {
		err := keyspace.CheckPrefix(tc.prefix)
		if tc.wantIn == "" {
			if err != nil {
				t.Errorf("CheckPrefix(%q) = %v, want nil", tc.prefix, err)
			}
			continue
		}
		if !errors.Is(err, keyspace.ErrBadPrefix) || !strings.Contains(err.Error(), tc.wantIn) {
			t.Errorf("CheckPrefix(%q) = %v, want ErrBadPrefix mentioning %q", tc.prefix, err, tc.wantIn)
		}
	}
}

func TestKeys(t *testing.T) {
	s := keyspace.Must("")
	if s.Prefix() != keyspace.DefaultPrefix {
		t.Errorf("default prefix = %q", s.Prefix())
	}
	if got := s.Key("entity", "1:t:x"); got != "trellis:entity:1:t:x" {
		t.Errorf("Key = %q", got)
	}
	if got := s.Tagged("timers", "p.0.1", "due"); got != "trellis:timers:{p.0.1}:due" {
		t.Errorf("Tagged = %q", got)
	}
	if keyspace.Slot(s.Tagged("timers", "p", "due")) != keyspace.Slot(s.Tagged("timers", "p", "data")) {
		t.Error("keys with one tag are in different slots")
	}
	for _, tag := range []string{"", "a}", "{a"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Tag(%q) did not panic", tag)
				}
			}()
			keyspace.Tag(tag)
		}()
	}
}

// TestSlotAgreesWithRedis: Slot computes what a real cluster's CLUSTER
// KEYSLOT says, for keys with and without tags, empty tags and braces in
// odd places.
func TestSlotAgreesWithRedis(t *testing.T) {
	client := testenv.RedisCluster(t)
	keys := []string{"", "a", "123456789", "trellis:entity:7:counter:visits", "{user1000}.following",
		"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{", "}{", "x{y", "trellis:timers:{t.3.17}:due"}
	for i := range 200 {
		keys = append(keys, "k"+strconv.Itoa(i*7919))
	}
	for _, k := range keys {
		want, err := client.ClusterKeySlot(t.Context(), k).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
		}
		if got := keyspace.Slot(k); int64(got) != want {
			t.Errorf("Slot(%q) = %d, Redis says %d", k, got, want)
		}
	}
}

// TestSpreadTags: the tags are in n equal slot ranges, in order, and the
// same on every call.
func TestSpreadTags(t *testing.T) {
	for _, n := range []int{1, 3, 16, 64} {
		tags := keyspace.SpreadTags("t", n)
		if len(tags) != n {
			t.Fatalf("SpreadTags(%d) gave %d tags", n, len(tags))
		}
		for i, tag := range tags {
			lo, hi := i*keyspace.Slots/n, (i+1)*keyspace.Slots/n
			if s := keyspace.Slot(keyspace.Tag(tag)); s < lo || s >= hi {
				t.Errorf("n=%d: tag %d %q is in slot %d, want [%d, %d)", n, i, tag, s, lo, hi)
			}
		}
		if again := keyspace.SpreadTags("t", n); strings.Join(again, ",") != strings.Join(tags, ",") {
			t.Errorf("n=%d: SpreadTags is not deterministic", n)
		}
	}
}
