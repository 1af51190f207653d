package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trellis-go/trellis/internal/testkit/testenv"
)

// proxyLag is how long a change of a Service's endpoints takes to reach
// the balancer: the endpoints controller and every node's kube-proxy act
// on a pod's deletion or readiness asynchronously, about a second apart
// on a healthy cluster. The preStop sleep is what covers it on removal.
const proxyLag = time.Second

// service is a Service's endpoints as the nodes' proxies program them:
// requests go round-robin to the ready servers, and a change of the
// endpoints (set) reaches the balancer lag after it was made.
type service struct {
	lag time.Duration

	mu       sync.Mutex
	ready    []*server
	next     int
	inFlight map[*server]int
	changed  *sync.Cond
}

func newService(lag time.Duration, servers ...*server) *service {
	s := &service{lag: lag, ready: slices.Clone(servers), inFlight: map[*server]int{}}
	s.changed = sync.NewCond(&s.mu)
	return s
}

// pick is the next ready server, round-robin, and what to call once its
// request is answered; nil when none is ready (the request fails, as on
// a Service with no endpoints).
func (s *service) pick() (*server, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ready) == 0 {
		return nil, func() {}
	}
	s.next = (s.next + 1) % len(s.ready)
	srv := s.ready[s.next]
	s.inFlight[srv]++
	return srv, func() {
		s.mu.Lock()
		s.inFlight[srv]--
		s.changed.Broadcast()
		s.mu.Unlock()
	}
}

// set puts srv behind the balancer (ready) or takes it out, lag from now
// (at once, on a service with no lag).
func (s *service) set(srv *server, ready bool) {
	if s.lag == 0 {
		s.apply(srv, ready)
		return
	}
	time.AfterFunc(s.lag, func() { s.apply(srv, ready) })
}

func (s *service) apply(srv *server, ready bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	has := slices.Contains(s.ready, srv)
	switch {
	case ready && !has:
		s.ready = append(s.ready, srv)
	case !ready && has:
		s.ready = slices.DeleteFunc(s.ready, func(r *server) bool { return r == srv })
	}
}

// awaitEndpoints waits (at most a minute) until n servers are in the
// endpoints, as the balancer sees them.
func (s *service) awaitEndpoints(t *testing.T, n int) {
	t.Helper()
	testenv.Eventually(t, time.Minute, fmt.Sprintf("%d servers in the endpoints", n), func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.ready) == n
	})
}

// awaitIdle waits until the requests sent to srv are answered.
func (s *service) awaitIdle(srv *server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.inFlight[srv] > 0 {
		s.changed.Wait()
	}
}

// pod is one pod of the Deployment as its kubelet runs it: the server
// process with the pod's environment (its HTTP and cluster ports fixed,
// as a pod's IP is), restarted in place, its readiness probed as the
// manifest says and reported to the Service's endpoints.
type pod struct {
	t   *testing.T
	m   podManifest
	env []string
	svc *service

	mu          sync.Mutex
	proc        *server // the current container
	ready       bool    // the probe's verdict on proc
	terminating bool    // proc was sent on its way out
	readyAt     chan struct{}
}

// startPod starts the pod's first container and its readiness probe,
// which runs until the test ends. It returns at once: the container
// becomes ready (awaitReady) once the probe says so.
func startPod(t *testing.T, m podManifest, env []string, svc *service) *pod {
	t.Helper()
	p := &pod{t: t, m: m, env: env, svc: svc}
	p.run()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.probe(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// run starts a container, not ready until probed.
func (p *pod) run() {
	proc := spawnServer(p.t, p.env)
	p.mu.Lock()
	p.proc, p.ready, p.terminating, p.readyAt = proc, false, false, make(chan struct{})
	p.mu.Unlock()
}

// probe asks the readiness path every period, as the kubelet does, from
// the container's start: successThreshold answers of 200 in a row make
// the container ready, failureThreshold failures (any other answer, or
// none within the timeout) unready. A terminating container stays out.
func (p *pod) probe(ctx context.Context) {
	client := &http.Client{Timeout: p.m.readyTimeout}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(p.m.readyPeriod)
	defer tick.Stop()
	var proc *server
	oks, fails := 0, 0
	for {
		p.mu.Lock()
		if p.proc != proc { // a new container: probed from scratch
			proc, oks, fails = p.proc, 0, 0
		}
		p.mu.Unlock()
		ok := probeOnce(ctx, client, proc.base+p.m.readyPath)
		if ok {
			oks, fails = oks+1, 0
		} else {
			oks, fails = 0, fails+1
		}
		p.mu.Lock()
		switch {
		case p.proc != proc || p.terminating:
		case !p.ready && oks >= p.m.readySuccesses:
			p.ready = true
			close(p.readyAt)
			p.svc.set(proc, true)
		case p.ready && fails >= p.m.readyFailures:
			p.ready = false
			p.svc.set(proc, false)
			p.t.Logf("%s failed its readiness probe %d times: out of the endpoints", proc.base, fails)
		}
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// probeOnce is one readiness probe: 200 within the client's timeout.
func probeOnce(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// awaitReady waits (at most a minute) until the current container's
// probe has made it ready, and returns the container.
func (p *pod) awaitReady() *server {
	p.t.Helper()
	p.mu.Lock()
	proc, readyAt := p.proc, p.readyAt
	p.mu.Unlock()
	select {
	case <-readyAt:
	case <-proc.exited:
		p.t.Fatalf("%s exited before it was ready: %v", proc.base, proc.waitErr)
	case <-time.After(time.Minute):
		p.t.Fatalf("%s not ready within a minute", proc.base)
	}
	return proc
}

// current is the pod's container now.
func (p *pod) current() *server {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proc
}

// terminate does what the kubelet does to a pod it stops: the pod leaves
// the endpoints (reaching the balancer proxyLag later), the preStop hook
// sleeps, and SIGTERM is sent; it returns when the signal is sent. The
// container then has the rest of the grace period to exit (awaitExit).
func (p *pod) terminate() time.Time {
	p.t.Helper()
	p.mu.Lock()
	proc := p.proc
	p.terminating, p.ready = true, false
	p.mu.Unlock()
	p.svc.set(proc, false)
	select {
	case <-time.After(p.m.preStop): // the manifest's preStop sleep
	case <-proc.exited:
		p.t.Fatalf("%s exited during its preStop sleep: %v", proc.base, proc.waitErr)
	}
	sent := time.Now()
	if err := proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("SIGTERM %s: %v", proc.base, err)
	}
	return sent
}

// awaitExit waits for the terminated container's exit for the rest of
// the grace period (it must exit with code 0), and kills it with SIGKILL
// then, failing the test, as the kubelet would. It returns how long the
// exit took after sent, the SIGTERM.
func (p *pod) awaitExit(sent time.Time) time.Duration {
	p.t.Helper()
	proc := p.current()
	select {
	case <-proc.exited:
		if proc.waitErr != nil {
			p.t.Errorf("%s exited with %v after SIGTERM, want exit code 0", proc.base, proc.waitErr)
		}
	case <-time.After(time.Until(sent.Add(p.m.grace - p.m.preStop))):
		p.t.Errorf("%s did not exit within its grace period (%v): SIGKILL", proc.base, p.m.grace)
		_ = proc.cmd.Process.Kill()
		<-proc.exited
	}
	return time.Since(sent)
}
