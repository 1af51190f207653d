// Package ring is a FIFO queue on a circular buffer.
package ring

// Ring is a FIFO queue on a circular buffer that grows by doubling, so that
// the controllers' buffers of unconfirmed and stashed messages cost no
// allocation per message in steady state.
type Ring[T any] struct {
	buf  []T // len is 0 or a power of two
	head int
	n    int
}

// Len is the number of elements in the ring.
func (r *Ring[T]) Len() int { return r.n }

// Push adds v at the back, growing the buffer if it is full.
func (r *Ring[T]) Push(v T) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

// At returns the i-th element from the front; 0 <= i < len.
func (r *Ring[T]) At(i int) T { return r.buf[(r.head+i)&(len(r.buf)-1)] }

// Set replaces the i-th element from the front.
func (r *Ring[T]) Set(i int, v T) { r.buf[(r.head+i)&(len(r.buf)-1)] = v }

// Pop removes and returns the front element; the ring must not be empty.
func (r *Ring[T]) Pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero // let the GC have it
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return v
}

// Clear empties the ring, keeping its buffer unless it has grown large.
func (r *Ring[T]) Clear() {
	if len(r.buf) > 1024 {
		*r = Ring[T]{}
		return
	}
	clear(r.buf)
	r.head, r.n = 0, 0
}

func (r *Ring[T]) grow() {
	size := max(16, 2*len(r.buf))
	buf := make([]T, size)
	for i := range r.n {
		buf[i] = r.At(i)
	}
	r.buf, r.head = buf, 0
}
