package trellis

import (
	"context"
	"time"
)

// kill stops the service the way a crash does, for the fault points of a
// test (WithFaults): the HTTP and cluster listeners and connections close
// at once, requests in flight included; the cluster membership is
// abandoned, not left (its key expires after the lease, and the others
// take its shards only then); no shard is handed over, and nothing is
// told to Redis any more (Redis is closed before the timer scheduler
// stops, so the timers it had claimed wait out their claim's lease). What
// still runs in-process (handlers, entities, timer calls) then stops, so
// that no goroutine is left. A later Shutdown returns nil at once, and
// killing a service that was shut down does nothing.
func (s *Service) kill() {
	s.shutdownOnce.Do(func() {
		s.log.Warn("killed: stopping without a goodbye (fault injection by a test)")
		_ = s.srv.Close()
		s.node.crash()
		if s.conn != nil {
			_ = s.conn.Close()
		}
		ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
		defer cancel()
		_ = s.host.Timers.Shutdown(ctx)
		_ = s.host.consumers.Stop(ctx) // their checkpoints are not saved: Redis is closed
		_ = s.host.workflows.Stop(ctx) // the steps that run are not committed: Redis is closed
		_ = s.host.System.Shutdown(ctx)
		if done := s.Done(); done != nil {
			<-done
		}
	})
}

// killTimeout bounds how long a killed service waits for what still runs
// in-process to stop.
const killTimeout = 10 * time.Second

// crash ends the node's part in the cluster without a word to Redis or
// to the other instances: no more renewals, moves or joins, the shards
// still recorded as owned, the transport's connections closed at once.
func (n *clusterNode) crash() {
	if n == nil {
		return
	}
	n.stopJoining()
	if m := n.cur.Load(); m != nil {
		m.host.Rebalancer().Shutdown()
		m.member.Abandon()
	}
	if n.server == nil { // never listened: Redis never answered
		return
	}
	n.dir.Abandon() // its registrations lapse with the lease
	now, cancel := context.WithCancel(context.Background())
	cancel() // a done context: the server closes its connections at once
	_ = n.server.Shutdown(now)
	_ = n.peers.Close()
}
