package peer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/trellis-go/trellis/internal/peer"
)

// The component client's side of forwarding: the instance it believed
// the owner answers ErrMoved, so it asks its owner table again and
// forwards once more.
func Example() {
	secret := []byte("example-cluster-secret-0123456789") // from TRELLIS_CLUSTER_SECRET
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func(h peer.Handler) *peer.Server {
		s, err := peer.NewServer(peer.ServerConfig{Secret: secret, Handler: h, Logger: quiet})
		if err != nil {
			panic(err)
		}
		if err := s.Start("127.0.0.1:0"); err != nil {
			panic(err)
		}
		return s
	}
	formerOwner := start(func(context.Context, peer.Call) (peer.Reply, error) {
		return peer.Reply{}, peer.NewError(peer.KindMoved, "", "shard 7 moved")
	})
	owner := start(func(_ context.Context, c peer.Call) (peer.Reply, error) {
		return peer.Reply{Value: json.RawMessage(`{"placed":"` + c.EntityID + `"}`)}, nil
	})
	ownerOf := map[bool]string{false: formerOwner.Addr(), true: owner.Addr()} // a stale table, then a fresh one

	client, err := peer.NewClient(peer.ClientConfig{Secret: secret, Logger: quiet})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	call := peer.Call{ComponentID: "orders", Method: "Place", EntityID: "o-1", Argument: json.RawMessage(`{"qty":1}`)}
	reply, err := client.Forward(ctx, ownerOf[false], call)
	if errors.Is(err, peer.ErrMoved) {
		fmt.Println("moved; re-routing once")
		reply, err = client.Forward(ctx, ownerOf[true], call)
	}
	fmt.Println(string(reply.Value), err)

	client.Close()
	formerOwner.Shutdown(ctx)
	owner.Shutdown(ctx)
	// Output:
	// moved; re-routing once
	// {"placed":"o-1"} <nil>
}
