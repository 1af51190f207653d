package assembly

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/trellis-go/trellis/internal/cluster/node"
	"github.com/trellis-go/trellis/internal/peer"
)

// Handovers carry the durable producers' sends between the instances of
// a cluster (trellis.DurableProducer): a Send on an instance that does not own the queue is handed
// to the owner as a forwarded call of its own kind (producerComponent,
// the method the producer id), which the owner's producer of that id
// takes. Made when the cluster's transport listens; nil otherwise, and
// then every Send is local.
type Handovers struct {
	node   *node.Node
	holder string // this instance's name as a queue's holder

	mu        sync.RWMutex
	receivers map[string]func(context.Context, json.RawMessage) (json.RawMessage, error)
}

// producerComponent is the component id, the kind of forwarded call, of
// the sends handed to a queue's owner; the method is the producer id.
const producerComponent = "trellis.producer"

func newHandovers(n *node.Node, holder string) *Handovers {
	return &Handovers{node: n, holder: holder,
		receivers: make(map[string]func(context.Context, json.RawMessage) (json.RawMessage, error))}
}

// Holder is this instance's name as a queue's holder.
func (hs *Handovers) Holder() string { return hs.holder }

// Add takes the sends to producer id's queue that other instances hand
// to this one.
func (hs *Handovers) Add(id string, receive func(context.Context, json.RawMessage) (json.RawMessage, error)) error {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if _, ok := hs.receivers[id]; ok {
		return fmt.Errorf("a durable producer of id %q runs already", id)
	}
	hs.receivers[id] = receive
	return nil
}

// serve runs a send another instance hands to a queue this one owns.
func (hs *Handovers) serve(ctx context.Context, c peer.Call) (peer.Reply, error) {
	hs.mu.RLock()
	receive := hs.receivers[c.Method]
	hs.mu.RUnlock()
	if receive == nil {
		return peer.Reply{}, peer.NewError(peer.KindMoved, "no_producer", "no durable producer %q runs here", c.Method)
	}
	v, err := receive(ctx, c.Argument)
	return peer.Reply{Value: v}, err
}

// Forward hands producer id's send (arg) to the owner at addr.
func (hs *Handovers) Forward(ctx context.Context, addr, id string, arg json.RawMessage) (peer.Reply, error) {
	return hs.node.Forward(ctx, addr, peer.Call{ComponentID: producerComponent, Method: id, Argument: arg})
}
