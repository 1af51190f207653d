// Package outbox is the code of the outbox guide (docs/outbox.md): a
// service that mails a notice for every state change of a seat hold,
// through a durable producer queue in the service's Redis, so that a
// notice whose Send returned is mailed even if the instance stops or dies
// before the mail goes out.
package outbox

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/api"
	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/runtime"
)

// Notice is what is mailed: a hold's new state.
type Notice struct {
	Hold  string `json:"hold"`
	State string `json:"state"`
}

// Mailer sends a notice (an SMTP or HTTP client in a real service). A
// notice can come twice (after a crash, see go doc ./delivery): key the
// mail by hold and state where that matters.
type Mailer interface {
	Mail(ctx context.Context, n Notice) error
}

// Setup starts the notices' producer, its consumer (the mailer) and the
// route that changes a hold's state.
func Setup(mailer Mailer) trellis.Setup {
	return func(h *trellis.Host, r chi.Router) error {
		// The queue lives in the service's Redis, under its prefix; on
		// several instances one owns it at a time, and a Send on any
		// other goes through the owner.
		notices, err := trellis.NewDurableProducer[Notice](h, "notices", delivery.ProducerSettings{}, nil)
		if err != nil {
			return err
		}
		if err := startMailer(h.System, notices, mailer); err != nil {
			return err
		}
		// A stopped producer controller makes the instance unready.
		if err := h.AddReadinessCheck("notices", func(context.Context) error { return notices.Err() }); err != nil {
			return err
		}
		r.Put("/holds/{id}/state/{state}", func(w http.ResponseWriter, req *http.Request) {
			// A real service changes the hold (an entity command) here,
			// then sends its notice.
			n := Notice{Hold: chi.URLParam(req, "id"), State: chi.URLParam(req, "state")}
			seqNr, err := notices.Send(req.Context(), n) // returns once stored
			if err != nil {
				api.WriteError(w, req, err)
				return
			}
			api.WriteJSON(w, req, http.StatusAccepted, map[string]int64{"notice": seqNr})
		})
		return nil
	}
}

// startMailer starts the consumer side: a consumer controller connected to
// the producer, and an actor that mails each notice and confirms it.
func startMailer(sys *runtime.System, notices *trellis.DurableProducer[Notice], mailer Mailer) error {
	cc, err := delivery.SpawnConsumerController[Notice](sys, "notices-cc", delivery.ConsumerSettings{})
	if err != nil {
		return err
	}
	_, err = runtime.Spawn(sys, "mailer", func() runtime.Behavior[delivery.Delivery[Notice]] {
		return runtime.Funcs[delivery.Delivery[Notice]]{
			Signal: func(ctx *runtime.Context[delivery.Delivery[Notice]], s runtime.Signal) {
				if _, ok := s.(runtime.Started); ok {
					cc.Tell(delivery.ConsumerStart[Notice]{DeliverTo: ctx.Self()})
				}
			},
			Message: func(ctx *runtime.Context[delivery.Delivery[Notice]], d delivery.Delivery[Notice]) {
				if err := mailer.Mail(context.Background(), d.Message); err != nil {
					// Not confirmed: delivered again after
					// ConsumerSettings.RedeliverAfter.
					ctx.Log().Warn("mail failed", "hold", d.Message.Hold, "err", err)
					return
				}
				d.Confirm()
			},
		}
	})
	if err != nil {
		return err
	}
	cc.Tell(delivery.RegisterToProducerController[Notice]{ProducerController: notices.Controller()})
	return nil
}
