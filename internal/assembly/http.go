package assembly

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/trellis-go/trellis/internal/admin"
	"github.com/trellis-go/trellis/internal/httpserver"
)

// readHeaderTimeout bounds how long a client may take to send the request
// headers (slowloris); idleTimeout how long a keep-alive connection waits
// for its next request.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
)

// serveHTTP makes the service's metrics, router and admin API, runs the
// application's setup on them, and the HTTP server that
// trellis.Service's Start and Serve run.
func serveHTTP(a *assembly) error {
	h, cfg := a.host, a.cfg
	metrics, err := httpserver.NewMetrics(append(h.Tracing.collectors(), a.collectors...)...)
	if err != nil {
		return fmt.Errorf("trellis: %w", err)
	}
	h.Metrics = metrics.Registry
	router := httpserver.New(httpserver.Options{
		Logger:         h.Logger,
		MaxBodyBytes:   cfg.MaxBodyBytes,
		LargeBodies:    map[string]int64{admin.ImportPath: max(admin.MaxImportBytes, cfg.MaxBodyBytes)},
		RequestTimeout: cfg.RequestTimeout,
		Metrics:        metrics,
		Readiness:      httpserver.Readiness{Store: h.Store, Timers: h.Timers, Checks: h.Checks},
		Contract:       cfg.Contract,
		Tracing:        h.Tracing.httpProvider(),
	})
	admin.Register(router, admin.Options{Token: cfg.AdminToken, Timers: h.Timers, Store: h.Store, Clock: h.Clock,
		Cluster: a.admin, Consumers: h.Consumers, Views: h.Views, Registry: h.Client.Registry(), Workflows: &h.Workflows})
	enforce, err := contractMiddleware(cfg.Contract)
	if err != nil {
		return err
	}
	router.Group(func(r chi.Router) {
		r.Use(httpserver.CheckQuery)
		r.Use(enforce...)
		err = cfg.Setup(r)
	})
	if err != nil {
		return fmt.Errorf("trellis: setup: %w", err)
	}
	s := &Server{handler: router, metrics: metrics, maxConns: cfg.MaxConnections, log: h.Logger}
	s.srv = &http.Server{
		Handler:           router,
		ReadHeaderTimeout: readHeaderTimeout,
		// A handler that overruns its request timeout still ends its
		// connection a little later.
		WriteTimeout: cfg.RequestTimeout + 5*time.Second,
		IdleTimeout:  idleTimeout,
		ErrorLog:     slog.NewLogLogger(h.Logger.Handler(), slog.LevelWarn),
	}
	a.http = s
	a.add(part{name: "HTTP requests", stop: s.stop, cut: s.cut})
	return nil
}

// contractMiddleware is the validation of the application's requests
// against its contract (none without one).
func contractMiddleware(spec []byte) ([]func(http.Handler) http.Handler, error) {
	if spec == nil {
		return nil, nil
	}
	enforce, err := httpserver.EnforceContract(spec)
	if err != nil {
		return nil, fmt.Errorf("trellis: WithContract: %w", err)
	}
	return []func(http.Handler) http.Handler{enforce}, nil
}

// Server is the service's HTTP server: its handler with all its
// middleware, served on the listener Start or Serve is given until the
// service's list stops it.
type Server struct {
	srv      *http.Server
	handler  http.Handler
	metrics  *httpserver.Metrics
	maxConns int
	log      *slog.Logger

	mu      sync.Mutex
	ln      net.Listener  // set by Start or Serve
	done    chan struct{} // closed when the Serve started by Start returns
	serveMu sync.Mutex
	served  error // what that Serve returned
}

// Handler is the service's HTTP handler, with all its middleware.
func (s *Server) Handler() http.Handler { return s.handler }

// Start serves on ln in the background until the service stops; Done is
// closed when serving ends.
func (s *Server) Start(ln net.Listener) {
	s.setListener(ln) // so that Addr answers as soon as Start returns
	done := make(chan struct{})
	s.mu.Lock()
	s.done = done
	s.mu.Unlock()
	go func() {
		defer close(done)
		err := s.Serve(ln)
		s.serveMu.Lock()
		s.served = err
		s.serveMu.Unlock()
		if err != nil {
			s.log.Error("HTTP server stopped", "err", err)
		}
	}()
}

// Serve serves HTTP on ln until the service stops, then returns nil; any
// other end is an error. It takes ownership of ln, and keeps at most
// maxConns connections open on it.
func (s *Server) Serve(ln net.Listener) error {
	s.setListener(ln)
	s.log.Info("listening", "addr", ln.Addr().String())
	// Errors net/http answers by itself become problems too.
	err := s.srv.Serve(httpserver.ProblemResponses(s.metrics.LimitConnections(ln, s.maxConns)))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("trellis: serve HTTP: %w", err)
}

func (s *Server) setListener(ln net.Listener) {
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
}

// Addr is the address the server listens on (nil before Start or Serve).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Done is closed when the serving that Start began has ended; nil before
// Start.
func (s *Server) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// stop stops accepting connections and waits for the requests in flight,
// within ctx (then it closes the connections left), and for Serve to
// return.
func (s *Server) stop(ctx context.Context) error {
	var errs []error
	if err := s.srv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("drain HTTP: %w", err))
		_ = s.srv.Close()
	}
	if done := s.Done(); done != nil {
		select {
		case <-done:
			s.serveMu.Lock()
			if s.served != nil {
				errs = append(errs, s.served)
			}
			s.serveMu.Unlock()
		case <-ctx.Done():
		}
	}
	return errors.Join(errs...)
}

// cut closes the listener and every connection at once, requests in
// flight included, and waits for Serve to return.
func (s *Server) cut() {
	_ = s.srv.Close()
	if done := s.Done(); done != nil {
		<-done
	}
}
