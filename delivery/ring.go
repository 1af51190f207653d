package delivery

// ring is a FIFO queue on a circular buffer that grows by doubling, so that
// the controllers' buffers of unconfirmed and stashed messages cost no
// allocation per message in steady state.
type ring[T any] struct {
	buf  []T // len is 0 or a power of two
	head int
	n    int
}

func (r *ring[T]) len() int { return r.n }

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

// at returns the i-th element from the front; 0 <= i < len.
func (r *ring[T]) at(i int) T { return r.buf[(r.head+i)&(len(r.buf)-1)] }

// set replaces the i-th element from the front.
func (r *ring[T]) set(i int, v T) { r.buf[(r.head+i)&(len(r.buf)-1)] = v }

// pop removes and returns the front element; the ring must not be empty.
func (r *ring[T]) pop() T {
	var zero T
	v := r.buf[r.head]
	r.buf[r.head] = zero // let the GC have it
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return v
}

// clear empties the ring, keeping its buffer unless it has grown large.
func (r *ring[T]) clear() {
	if len(r.buf) > 1024 {
		*r = ring[T]{}
		return
	}
	clear(r.buf)
	r.head, r.n = 0, 0
}

func (r *ring[T]) grow() {
	size := max(16, 2*len(r.buf))
	buf := make([]T, size)
	for i := range r.n {
		buf[i] = r.at(i)
	}
	r.buf, r.head = buf, 0
}
