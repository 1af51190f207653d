package entityhost

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/cluster"
	"github.com/trellis-go/trellis/internal/peer"
	"github.com/trellis-go/trellis/internal/ratelog"
	"github.com/trellis-go/trellis/internal/store"
	"github.com/trellis-go/trellis/internal/tracing"
)

// Defaults of Config's durations.
const (
	// DefaultDrainTimeout bounds how long a shard's hand-over waits for
	// its commands in flight.
	DefaultDrainTimeout = 5 * time.Second
	// DefaultPoll is how often a command waiting for its shard's owner
	// looks at the table again when nothing woke it: it wakes at once
	// when this instance starts serving or hands over a shard, the last
	// command of a shard being handed over is done, the owners table is
	// read again, or the membership is lost.
	DefaultPoll = refreshEvery
	// refreshEvery bounds how often waiting commands read every shard
	// record again (Rebalancer.Refresh) when the table may be stale.
	refreshEvery = 100 * time.Millisecond
)

// Config is what New needs.
type Config struct {
	// Member is this instance's membership (required); New makes its
	// Rebalancer.
	Member *cluster.Member
	// Peers reaches the other instances (required).
	Peers *peer.Client
	// Registry holds the components forwarded calls run on (required).
	Registry *components.Registry
	// DrainTimeout bounds the wait for a shard's commands in flight before
	// it is released (DefaultDrainTimeout when zero).
	DrainTimeout time.Duration
	// Poll is how often a waiting command looks for its shard's owner
	// (DefaultPoll when zero).
	Poll time.Duration
	// Logger receives hand-over events (slog.Default when nil).
	Logger *slog.Logger
	// BeforeRelease, when set, runs first in Host.BeforeRelease, before
	// the shard's commands drain: the service's consumers stop consuming
	// the shard there (their handlers may call its entities).
	BeforeRelease func(ctx context.Context, shard int)
	// OnServe, when set, is the rebalancer's cluster.Hooks.OnServe: called
	// as this instance starts serving a shard.
	OnServe func(cluster.Fence)
	// OnMoved, when set, is the rebalancer's cluster.Hooks.OnMoved: called
	// after this instance acquired (acquired true) or released a shard.
	OnMoved func(shard int, acquired bool)
	// OnForward, when set, is called after each forward to another
	// instance with the call's component id, the round trip as seen here
	// (the transport's call alone, without the waits for another owner)
	// and its error as the caller gets it (nil, an error fromPeer made).
	OnForward func(component string, took time.Duration, err error)
	// Tracer makes a span of each forward and of each forwarded command
	// run here (the caller's trace continues over the transport); nil:
	// tracing is off.
	Tracer trace.Tracer
}

// ErrLost is wrapped by Route when this instance's membership was lost
// while the command waited for its shard's owner (its lease expired in
// Redis): this Host will never serve a shard again, and the command is to
// be routed by the membership that replaces it.
var ErrLost = errors.New("entityhost: the membership was lost")

// Host is an instance's entities.Cluster and peer.Handler. It is safe for
// concurrent use.
type Host struct {
	cfg  Config
	reb  *cluster.Rebalancer
	gate gate
	log  *slog.Logger

	refreshes singleflight.Group // the Refresh under way, which concurrent callers share
	refreshMu sync.Mutex
	refreshed time.Time // when the last successful Refresh started

	unknowns ratelog.Limit // of the "outcome unknown" lines
}

var _ entities.Cluster = (*Host)(nil)

// New makes the Host of cfg.Member and its Rebalancer, whose
// BeforeRelease hook is the Host's (which is why New makes it: the hook
// and the Host need each other). Start the rebalancer once the entity
// types are started and the peer server listens.
func New(cfg Config) (*Host, error) {
	if cfg.Member == nil || cfg.Peers == nil || cfg.Registry == nil {
		return nil, errors.New("entityhost: Config.Member, Config.Peers and Config.Registry are required")
	}
	cfg.DrainTimeout = cmp.Or(cfg.DrainTimeout, DefaultDrainTimeout)
	cfg.Poll = cmp.Or(cfg.Poll, DefaultPoll)
	h := &Host{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()), unknowns: ratelog.Limit{Max: unknownLogMax, Window: time.Second}}
	h.reb = cluster.NewRebalancer(cfg.Member, cluster.Hooks{BeforeRelease: h.BeforeRelease,
		OnServe: func(f cluster.Fence) {
			if cfg.OnServe != nil {
				cfg.OnServe(f)
			}
			h.gate.changes.notify()
		},
		OnMoved: func(shard int, acquired bool) {
			if cfg.OnMoved != nil {
				cfg.OnMoved(shard, acquired)
			}
			h.gate.changes.notify()
		}})
	h.gate.serving = h.reb.Serving
	return h, nil
}

// Rebalancer is the rebalancer New made: Start it, and Leave through it.
func (h *Host) Rebalancer() *cluster.Rebalancer { return h.reb }

// Fence implements entities.Cluster: the rebalancer's Serving of the
// entity's shard.
func (h *Host) Fence(entityType, id string) (cluster.Fence, bool) {
	return h.reb.Serving(cluster.ShardOf(entityType, id))
}

// Route implements entities.Cluster: admitted here when this instance
// serves the shard, the owner's address when another does, and otherwise
// a wait, polling the table, until one of these holds, ctx ends, or the
// membership is lost (an error wrapping ErrLost).
func (h *Host) Route(ctx context.Context, entityType, id string) (string, func(), error) {
	shard := cluster.ShardOf(entityType, id)
	for {
		wake := h.gate.changes.next()
		if done, ok := h.gate.admit(shard); ok {
			return "", done, nil
		}
		o, ok := h.reb.Owner(shard)
		if ok && o.Owner != h.cfg.Member.ID() {
			return o.Addr, nil, nil
		}
		if !h.gate.draining(shard) {
			// No live owner known, or the table names this instance,
			// which does not serve the shard (its lease lapsed, or it was
			// deposed): the table may be stale, and the rebalancer's own
			// passes may have stopped (it is leaving). A Redis out of
			// reach will not name an owner before ctx ends: 503 now.
			if err := h.refresh(ctx, time.Now().Add(-refreshEvery)); store.Unavailable(err) {
				return "", nil, fmt.Errorf("entityhost: find the owner of shard %d: %w", shard, store.Classify(err))
			}
		}
		end := cluster.Waiting(ctx, shard)
		err := h.pause(ctx, wake)
		end()
		if err != nil {
			return "", nil, fmt.Errorf("entityhost: wait for an owner of shard %d: %w", shard, err)
		}
	}
}

// Admit implements entities.Cluster: a forwarded command is admitted, or
// waits while this instance hands its shard over (or is taking it: the
// rebalancer's Moving) and then is refused with entities.ErrMoved; it is
// never sent on. Were it refused at once while the shard's record still
// names this instance, the caller's table would send it back here.
func (h *Host) Admit(ctx context.Context, entityType, id string) (func(), error) {
	shard := cluster.ShardOf(entityType, id)
	for {
		wake := h.gate.changes.next()
		if done, ok := h.gate.admit(shard); ok {
			return done, nil
		}
		if !h.gate.draining(shard) && !h.reb.Moving(shard) {
			return nil, fmt.Errorf("shard %d is not served by %s: %w", shard, h.cfg.Member.ID(), entities.ErrMoved)
		}
		end := cluster.Waiting(ctx, shard)
		err := h.pause(ctx, wake)
		end()
		if errors.Is(err, ErrLost) {
			return nil, fmt.Errorf("shard %d is not served by %s (%w): %w", shard, h.cfg.Member.ID(), err, entities.ErrMoved)
		} else if err != nil {
			return nil, fmt.Errorf("entityhost: wait for the hand-over of shard %d: %w", shard, err)
		}
	}
}

// Forward implements entities.Cluster over the peer transport, with ctx's
// deadline and cancellation. Errors come back as the caller would have had
// them locally (see fromPeer), as soon as the owner answers: a command
// that may have run there is components.ErrOutcomeUnknown (and logged),
// never routed again. Only a command that surely did not run is: when the
// owner answers "moved", the table is read again before returning (if it
// cannot be, the answer is components.ErrUnavailable, since routing again
// would find the same owner); when the owner cannot be reached at all,
// Forward waits (bounded by ctx) until the table names another owner, and
// then answers "moved" too, so that the entity layer routes the command
// again.
func (h *Host) Forward(ctx context.Context, addr string, call components.DeferredCall) (json.RawMessage, error) {
	ctx, span := tracing.StartCall(ctx, h.cfg.Tracer, "forward ", call.ComponentID, call.Method, call.EntityID, trace.SpanKindClient)
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrPeer.String(addr))
	}
	reply, err := h.forward(ctx, addr, call)
	tracing.End(span, errorType(err))
	return reply, err
}

// errorType is components.ErrorType, which names a command refused
// because its shard moved as such.
func errorType(err error) string {
	if errors.Is(err, entities.ErrMoved) {
		return "moved"
	}
	return components.ErrorType(err)
}

func (h *Host) forward(ctx context.Context, addr string, call components.DeferredCall) (json.RawMessage, error) {
	started := time.Now()
	reply, sent := h.cfg.Peers.Forward(ctx, addr, peer.Call{
		ComponentID: call.ComponentID, Method: call.Method, EntityID: call.EntityID, Argument: call.Argument,
	})
	err := fromPeer(sent)
	if h.cfg.OnForward != nil {
		h.cfg.OnForward(call.ComponentID, time.Since(started), err)
	}
	switch {
	case sent == nil:
		return reply.Value, nil
	case errors.Is(err, components.ErrOutcomeUnknown):
		h.logUnknown(call, addr, err)
	case notRun(sent):
		// The owner was not reached: once another instance owns the
		// shard (or this membership is lost, and the next one routes),
		// the command goes there.
		werr := h.awaitOtherOwner(ctx, cluster.ShardOf(call.ComponentID, call.EntityID), addr)
		if werr == nil || errors.Is(werr, ErrLost) {
			return nil, fmt.Errorf("%w (the owner could not be reached: %w)", entities.ErrMoved, err)
		}
		return nil, fmt.Errorf("entityhost: the owner %s could not be reached and no other instance took the shard over (%v): %w: %w: %w",
			addr, werr, components.ErrOwnerUnreachable, components.ErrUnavailable, sent)
	case errors.Is(err, entities.ErrMoved):
		if rerr := h.refresh(ctx, started); store.Unavailable(rerr) {
			// Routed again by a table that cannot be read, it would go
			// to the same instance: it did not run, retry later.
			return nil, fmt.Errorf("entityhost: %s moved and the owners table cannot be read: %w: %w",
				addr, components.ErrUnavailable, store.Classify(rerr))
		}
	}
	return nil, err
}

// unknownLogMax bounds the "outcome unknown" lines a second.
const unknownLogMax = 5

// logUnknown logs a forward that may have run on the owner though its
// caller gets an error, at most unknownLogMax lines a second.
func (h *Host) logUnknown(call components.DeferredCall, addr string, err error) {
	ok, leftOut := h.unknowns.Allow(time.Now())
	if !ok {
		return
	}
	args := []any{"component", call.ComponentID, "method", call.Method, "owner", addr, "err", err.Error()}
	if leftOut > 0 {
		args = append(args, "not_logged", leftOut)
	}
	h.log.Warn("entityhost: a forwarded command's outcome is unknown: the owner may have applied it", args...)
}

// awaitOtherOwner waits until the table names an owner of shard other
// than the one at addr (or this instance serves it), reading the records
// again every refreshEvery; ctx's error if it ends first, or ErrLost.
func (h *Host) awaitOtherOwner(ctx context.Context, shard int, addr string) error {
	defer cluster.Waiting(ctx, shard)()
	for {
		wake := h.gate.changes.next()
		if _, ok := h.reb.Serving(shard); ok {
			return nil
		}
		if o, ok := h.reb.Owner(shard); ok && o.Addr != addr {
			return nil
		}
		_ = h.refresh(ctx, time.Now().Add(-refreshEvery)) // a failure: try again after the pause
		if err := h.pause(ctx, wake); err != nil {
			return err
		}
	}
}

// refresh reads every shard record again unless a refresh that started
// after since succeeded already. Concurrent callers share the one under
// way, success or failure, each waiting for it within its own ctx: while
// Redis does not answer, a hundred waiting commands wait for one read
// timeout, not for a hundred in a row.
func (h *Host) refresh(ctx context.Context, since time.Time) error {
	h.refreshMu.Lock()
	fresh := h.refreshed.After(since)
	h.refreshMu.Unlock()
	if fresh {
		return nil
	}
	ch := h.refreshes.DoChan("", func() (any, error) {
		started := time.Now()
		err := h.reb.Refresh(ctx)
		if err == nil {
			h.refreshMu.Lock()
			h.refreshed = started
			h.refreshMu.Unlock()
			h.gate.changes.notify()
		} else if ctx.Err() == nil {
			h.log.Debug("entityhost: refresh the owners table", "err", err.Error())
		}
		return nil, err
	})
	select {
	case res := <-ch:
		return res.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pause waits until wake is closed (see gate.changes) or one poll
// interval has passed, or until ctx ends (its error) or the membership is
// lost (ErrLost): a lost membership serves no shard again, and what waits
// on it must not wait for its deadline.
func (h *Host) pause(ctx context.Context, wake <-chan struct{}) error {
	t := time.NewTimer(h.cfg.Poll)
	defer t.Stop()
	select {
	case <-wake:
		return nil
	case <-t.C:
		return nil
	case <-h.cfg.Member.Lost():
		return ErrLost
	case <-ctx.Done():
		return ctx.Err()
	}
}

// BeforeRelease is the rebalancer's hook: it stops admitting commands for
// shard (they wait, then go to the new owner) and waits, at most
// DrainTimeout, for those in flight to finish. It always lets the release
// go on: a command still running past the bound has its write refused by
// the fence. It is idempotent.
func (h *Host) BeforeRelease(ctx context.Context, shard int) error {
	if h.cfg.BeforeRelease != nil {
		h.cfg.BeforeRelease(ctx, shard)
	}
	h.gate.drain(shard)
	ctx, cancel := context.WithTimeout(ctx, h.cfg.DrainTimeout)
	defer cancel()
	for {
		wake := h.gate.changes.next()
		if h.gate.busy(shard) == 0 {
			break
		}
		if err := h.pause(ctx, wake); err != nil {
			h.log.Warn("entityhost: releasing a shard with commands still in flight",
				"shard", shard, "in_flight", h.gate.busy(shard), "err", err.Error())
			return nil
		}
	}
	return nil
}

// hereInvoker is a component that can run a forwarded call here or not
// at all (entities.Running).
type hereInvoker interface {
	InvokeJSONHere(ctx context.Context, entityID, method string, arg []byte) ([]byte, error)
}

// Handle is the peer.Handler of this instance: it runs a forwarded call
// here only (an entity whose shard is not served here answers
// entities.ErrMoved, as peer.KindMoved), and answers its errors with the
// kinds and codes the caller's Forward maps back.
func (h *Host) Handle(ctx context.Context, c peer.Call) (peer.Reply, error) {
	ctx, span := tracing.StartCall(ctx, h.cfg.Tracer, "run forwarded ", c.ComponentID, c.Method, c.EntityID, trace.SpanKindServer)
	reply, err := h.run(ctx, c)
	tracing.End(span, errorType(err))
	if err != nil {
		return peer.Reply{}, ToPeer(err)
	}
	return peer.Reply{Value: reply}, nil
}

// run runs a forwarded call here, or not at all.
func (h *Host) run(ctx context.Context, c peer.Call) ([]byte, error) {
	comp, err := h.cfg.Registry.Lookup(c.ComponentID)
	if err != nil {
		return nil, err
	}
	if here, ok := comp.(hereInvoker); ok {
		return here.InvokeJSONHere(ctx, c.EntityID, c.Method, c.Argument)
	}
	return comp.InvokeJSON(ctx, c.EntityID, c.Method, c.Argument)
}
