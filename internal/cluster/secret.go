package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/trellis-go/trellis/internal/keyspace"
)

// secretLen is the length in bytes of a secret SharedSecret makes.
const secretLen = 32

// SharedSecret returns the cluster secret kept in Redis for the instances
// of prefix that were given none: the first instance to ask stores a new
// random one (SET NX), every other reads it. Its key,
// <prefix>:cluster:{members}:secret, has no expiry.
//
// Such a secret keeps out whoever cannot read the service's Redis; anyone
// who can read it can also rewrite the state the cluster guards, so it
// adds no reach. A secret from the environment keeps the two apart.
func SharedSecret(ctx context.Context, client redis.UniversalClient, prefix string) ([]byte, error) {
	space, err := keyspace.New(prefix)
	if err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	key := space.Tagged(area, membersTag, "secret")
	fresh := make([]byte, secretLen)
	_, _ = rand.Read(fresh) // never fails (crypto/rand)
	if err := client.SetNX(ctx, key, hex.EncodeToString(fresh), 0).Err(); err != nil {
		return nil, fmt.Errorf("cluster secret: store one in Redis: %w", err)
	}
	kept, err := client.Get(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("cluster secret: read it from Redis: %w", err)
	}
	if len(kept) < 2*secretLen {
		return nil, fmt.Errorf("cluster secret: the one in Redis (%s) is %d characters; want %d hex digits", key, len(kept), 2*secretLen)
	}
	return []byte(kept), nil
}
