package views_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/goleak"

	"github.com/trellis-go/trellis"
	"github.com/trellis-go/trellis/components"
	"github.com/trellis-go/trellis/entities"
	"github.com/trellis-go/trellis/internal/testkit/testenv"
	"github.com/trellis-go/trellis/trellistest"
	"github.com/trellis-go/trellis/views"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(trellistest.Servers(m)) }

// order is the tests' entity state.
type order struct {
	Customer string `json:"customer"`
	Status   string `json:"status"`
	Created  int64  `json:"created"`
	Total    int    `json:"total"`
}

// orderRow is the tests' view row.
type orderRow struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Status   string `json:"status"`
	Created  int64  `json:"created"`
	Total    int    `json:"total"`
}

var orders = entities.Define("view-test-order", func(string) order { return order{} })

var putOrder = entities.Command(orders, "put",
	func(ctx *entities.Ctx[order, order], _ order, o order) entities.Effect[order, order] {
		return ctx.UpdateState(o).ThenReply(o)
	})

var getOrder = entities.Command(orders, "get",
	func(ctx *entities.Ctx[order, order], o order, _ components.Done) entities.Effect[order, order] {
		return ctx.Reply(o)
	})

var removeOrder = entities.Command(orders, "remove",
	func(ctx *entities.Ctx[order, order], o order, _ components.Done) entities.Effect[order, order] {
		return ctx.DeleteEntity().ThenReply(o)
	})

// toRow is the tests' updater: a row per order, none for a cancelled one.
func toRow(c views.Change[order]) views.Update[orderRow] {
	switch {
	case c.Deleted:
		return views.Delete[orderRow]()
	case c.State.Status == "cancelled":
		return views.Delete[orderRow]()
	}
	o := c.State
	return views.Upsert(orderRow{ID: c.EntityID, Customer: o.Customer, Status: o.Status, Created: o.Created, Total: o.Total})
}

var (
	orderView  = views.Define("test-orders", orders, toRow)
	byCustomer = orderView.Query("by-customer", views.Eq("customer", "status"), views.SortBy("created", views.Desc))
	byTotal    = orderView.Query("by-total", views.Range("total"), views.MaxLimit(50))
	all        = orderView.Query("all")
)

func app(h *trellis.Host, r chi.Router) error {
	if _, err := orders.Start(h.Entities()); err != nil {
		return err
	}
	r.Get("/orders/stream", func(w http.ResponseWriter, req *http.Request) {
		params := make(map[string]string)
		for name, values := range req.URL.Query() {
			params[name] = values[0]
		}
		byCustomer.ServeStream(w, req, h.Views(), views.Request{Params: params})
	})
	return orderView.Start(h.Views())
}

// stores are the stores a view test runs on: the embedded store, Redis
// and Redis Cluster (both in the cluster mode, one instance).
var stores = []struct {
	name  string
	start func(t *testing.T) *trellistest.Service
}{
	{"memory", func(t *testing.T) *trellistest.Service { return trellistest.Start(t, app) }},
	{"redis", func(t *testing.T) *trellistest.Service {
		ts := trellistest.StartInstances(t, 1, app)[0]
		trellistest.WaitSettled(t, ts)
		return ts
	}},
	{"redis-cluster", func(t *testing.T) *trellistest.Service {
		prefix := "trellis-test-" + rand.Text()
		client := testenv.RedisCluster(t)
		t.Cleanup(func() { testenv.DeleteKeys(t, client, prefix+":*") })
		url := testenv.RedisClusterURL(t)
		ts := trellistest.Start(t, app, trellistest.WithStorePrefix(prefix),
			trellistest.WithConfig(func(c *trellis.Config) { c.RedisClusterURL = url }))
		trellistest.WaitSettled(t, ts)
		return ts
	}},
}

// put writes order id and returns the position to read it at.
func put(t testing.TB, ts *trellistest.Service, id string, o order) string {
	t.Helper()
	ctx := context.Background()
	if _, err := putOrder.Invoke(ctx, ts.Host().Client, id, o); err != nil {
		t.Fatalf("put %s: %v", id, err)
	}
	return written(t, ts, id)
}

func remove(t testing.TB, ts *trellistest.Service, id string) string {
	t.Helper()
	if _, err := removeOrder.Invoke(context.Background(), ts.Host().Client, id, components.Done{}); err != nil {
		t.Fatalf("remove %s: %v", id, err)
	}
	return written(t, ts, id)
}

func written(t testing.TB, ts *trellistest.Service, id string) string {
	t.Helper()
	pos, err := ts.Host().Views().Written(context.Background(), orders.ComponentID(), id)
	if err != nil {
		t.Fatal(err)
	}
	return pos.String()
}

// caughtUp waits until the view applied every position.
func caughtUp(t testing.TB, ts *trellistest.Service, positions ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	for _, text := range positions {
		pos, err := views.ParsePosition(text)
		if err == nil {
			err = ts.Host().Views().WaitFor(ctx, orderView.Name(), pos)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// pageAll reads every page of q with req, after position after.
func pageAll(t testing.TB, ts *trellistest.Service, q *views.Query[orderRow], req views.Request) []orderRow {
	t.Helper()
	var rows []orderRow
	for i := 0; ; i++ {
		p, err := q.Page(context.Background(), ts.Host().Views(), req)
		if err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		rows = append(rows, p.Rows...)
		if p.Next == "" {
			return rows
		}
		req.Token, req.After = p.Next, ""
	}
}

const waitLong = 10 * time.Second
