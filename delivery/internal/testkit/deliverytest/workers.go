package deliverytest

import (
	"testing"

	"github.com/trellis-go/trellis/delivery"
	"github.com/trellis-go/trellis/runtime"
)

// Worker is a worker of work pulling: a consumer controller, its
// consumer, and, when the test wants a lossy network, a faultLink in front
// of the controller; registered is what the receptionist lists.
type Worker struct {
	cc         runtime.Ref[delivery.ConsumerCommand[Job]]
	consumer   runtime.Ref[ConsMsg]
	link       *FaultLink[Job]
	Registered runtime.Ref[delivery.ConsumerCommand[Job]]
}

// WorkerSpec describes a Worker.
type WorkerSpec struct {
	Consumer delivery.ConsumerSettings // its consumer controller's settings
	Spec     ConsumerSpec              // its consumer's behavior
	toCC     *Faults                   // with a link: what it does to SequencedMessages; nil: no link
	toPC     Faults                    // with a link: what it does to the answers
	seed     uint64                    // with a link: its random streams
}

// SpawnWorker starts a worker named name and registers it under key.
func SpawnWorker(t testing.TB, sys *runtime.System, name string, key runtime.ServiceKey[delivery.ConsumerCommand[Job]], ws WorkerSpec, col *Collector) *Worker {
	t.Helper()
	cc, err := delivery.SpawnConsumerController[Job](sys, name+"-cc", ws.Consumer)
	if err != nil {
		t.Fatalf("spawn worker %s: %v", name, err)
	}
	w := &Worker{cc: cc, Registered: cc}
	w.consumer = SpawnConsumer(t, sys, name, cc, ws.Spec, col)
	if ws.toCC != nil {
		w.link = NewFaultLink[Job](t, sys, name+"-link", nil, cc, *ws.toCC, ws.toPC, ws.seed)
		w.Registered = w.link.toCC
	}
	runtime.Register(sys, key, w.Registered)
	return w
}

// Stop stops the worker's consumer, its consumer controller and its link:
// the receptionist drops it.
func (w *Worker) Stop(sys *runtime.System) {
	sys.Stop(w.consumer)
	sys.Stop(w.cc)
	if w.link != nil {
		sys.Stop(w.link.toCC)
		sys.Stop(w.link.ToPC)
	}
}
