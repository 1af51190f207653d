package ordering

import (
	"log/slog"
	"slices"
	"sync"

	"github.com/trellis-go/trellis/consumers"
)

// Notice is what the order-notices consumer records of an order.
type Notice struct {
	OrderID string `json:"orderId"`
	// Kind is "confirmed", or "ended" when the order was removed before
	// it was confirmed: cancelled, or expired by its timer (both delete
	// the order, so its changes do not tell them apart).
	Kind string `json:"kind"`
}

// The kinds of notice.
const (
	NoticeConfirmed = "confirmed"
	NoticeEnded     = "ended"
)

// Notices is the order-notices consumer's handler and what it recorded:
// one notice per order and kind, however often a change is handled (at
// least once), each logged once as "order notice". A real service would
// mail or publish here; the list is this instance's (in a cluster, each
// instance records the notices of the shards it serves).
type Notices struct {
	log  *slog.Logger
	mu   sync.Mutex
	list []Notice
}

// NewNotices returns an empty Notices that logs to log.
func NewNotices(log *slog.Logger) *Notices { return &Notices{log: log} }

// Consumer defines the order-notices consumer of Orders with n's Handle:
// start it in the service's setup (Consumer().Start(h.Consumers())).
func (n *Notices) Consumer() *consumers.Consumer[Order] {
	return consumers.Define("order-notices", Orders, n.Handle)
}

// Handle records a notice for an order confirmed, or removed unconfirmed;
// other changes (placing) are ignored.
func (n *Notices) Handle(ctx *consumers.Ctx, c consumers.Change[Order]) consumers.Effect {
	kind := NoticeEnded
	switch {
	case c.Deleted:
	case c.State.Confirmed:
		kind = NoticeConfirmed
	default:
		return ctx.Ignore()
	}
	notice := Notice{OrderID: c.EntityID, Kind: kind}
	n.mu.Lock()
	defer n.mu.Unlock()
	if slices.Contains(n.list, notice) {
		return ctx.Done() // handled before: at least once
	}
	n.list = append(n.list, notice)
	n.log.Info("order notice", "order", notice.OrderID, "kind", notice.Kind, "revision", c.Revision)
	return ctx.Done()
}

// List is the notices recorded so far, in order.
func (n *Notices) List() []Notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.list)
}
