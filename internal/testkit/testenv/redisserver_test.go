package testenv

import (
	"errors"
	"net"
	"testing"
)

// TestRedisServerPortTaken: a redis-server started on a port that
// something took since it was found free fails with errPortTaken, whether
// another redis-server answers there or a listener that speaks no Redis
// holds it; StartRedisServer then tries another port.
func TestRedisServerPortTaken(t *testing.T) {
	other := StartRedisServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for name, port := range map[string]int{
		"another redis-server": other.port,
		"a silent listener":    ln.Addr().(*net.TCPAddr).Port,
	} {
		t.Run(name, func(t *testing.T) {
			r := newRedisServer(t, port, nil)
			if err := r.launch(); !errors.Is(err, errPortTaken) {
				t.Fatalf("launch on %s's port %d: %v, want errPortTaken", name, port, err)
			}
		})
	}
	r := StartRedisServer(t)
	ours, err := answersAs(t.Context(), r.Client(t), r.cmd.Process.Pid)
	if err != nil || !ours || r.port == other.port {
		t.Fatalf("a new server on port %d answers as its own process %t (%v)", r.port, ours, err)
	}
}
