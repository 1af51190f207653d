package trellis_test

import (
	"testing"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/keyspace"
	"github.com/trellis-go/trellis/internal/peer"
	"github.com/trellis-go/trellis/timers"
)

// TestPublicNamesMatchInternal: the public packages spell out the values
// of their constants (so that go doc shows them, not an internal
// package's name); each is the one the internal package that acts on it
// uses.
func TestPublicNamesMatchInternal(t *testing.T) {
	cases := []struct {
		name             string
		public, internal string
	}{
		{"trellis.EnvClusterTLSCert", trellis.EnvClusterTLSCert, peer.EnvTLSCert},
		{"trellis.EnvClusterTLSKey", trellis.EnvClusterTLSKey, peer.EnvTLSKey},
		{"trellis.EnvClusterTLSCA", trellis.EnvClusterTLSCA, peer.EnvTLSCA},
		{"trellis.EnvClusterSecret", trellis.EnvClusterSecret, peer.EnvSecret},
		{"entities.DefaultRedisPrefix", entities.DefaultRedisPrefix, keyspace.DefaultPrefix},
		{"timers.DefaultRedisPrefix", timers.DefaultRedisPrefix, keyspace.DefaultPrefix},
	}
	for _, tc := range cases {
		if tc.public != tc.internal {
			t.Errorf("%s = %q, but the internal package uses %q", tc.name, tc.public, tc.internal)
		}
	}
}
