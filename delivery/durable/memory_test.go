package durable_test

import (
	"testing"

	"github.com/trellis-go/trellis/delivery/durable"
	"github.com/trellis-go/trellis/delivery/internal/testkit/queuetest"
)

func TestMemoryContract(t *testing.T) {
	queuetest.Run(t, func(t *testing.T) (durable.Queue[queuetest.Payload], func() durable.Queue[queuetest.Payload]) {
		q := durable.NewMemory[queuetest.Payload]()
		return q, func() durable.Queue[queuetest.Payload] { return q }
	})
}
