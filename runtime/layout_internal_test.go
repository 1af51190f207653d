package runtime

import (
	"testing"
	"unsafe"
)

// Cells and held queues are whole cache lines, so that they are allocated
// on line boundaries and two actors never share a line (see the pad in
// cell). A new field breaks this until the pad is adjusted.
func TestCellSize(t *testing.T) {
	const line = 64
	sizes := []struct {
		name string  // the type
		size uintptr // its size in bytes
	}{
		{"cell[int]", unsafe.Sizeof(cell[int]{})},
		{"cell[struct of 6 words]", unsafe.Sizeof(cell[[6]uint64]{})},
		{"heldQueue[int]", unsafe.Sizeof(heldQueue[int]{})},
	}
	for _, s := range sizes {
		if s.size%line != 0 {
			t.Errorf("%s is %d bytes, not a multiple of %d: adjust its pad", s.name, s.size, line)
		}
	}
}
