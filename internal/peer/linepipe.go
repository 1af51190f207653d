package peer

import (
	"io"
	"sync"
)

// linePipe carries a stream's lines (a tell stream's, a call stream's)
// from their writer to the request body that the HTTP/2 transport reads.
// Unlike an io.Pipe, a write does not wait for the reader to take it: the
// lines wait in a buffer, and each Read takes all that fits, so the lines
// written while the transport sends a frame go out together in the next
// one, and the writer goes on meanwhile. A write waits only while
// linePipeLimit bytes are waiting (the transport is held back by the
// peer's flow control): that backs a tell sender's queue up, and Tell
// then fails, as the peer is behind; a forward waits, within its
// deadline. A line is written whole or not at all.
type linePipe struct {
	mu      sync.Mutex
	buf     []byte // written, not yet read
	spare   []byte // the buffer the last Read emptied, reused for writing
	err     error  // set when closed: io.EOF by the writer, else why
	readErr error  // what reads and writes get once the reader closed or broke the pipe
	// written and taken count the bytes written and the bytes a Read
	// took, since the pipe was made: a line that ends past taken never
	// reached the transport.
	written, taken uint64
	// avail wakes the reader after a write (one token suffices);
	// space wakes a writer waiting for the reader to drain.
	avail, space chan struct{}
}

// linePipeLimit is how many bytes wait before a write does; past
// linePipeChunk a write wakes the reader without waiting for a flush.
const (
	linePipeLimit = 256 << 10
	linePipeChunk = 16 << 10
)

func newLinePipe() *linePipe {
	return &linePipe{avail: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Write appends b, waiting while linePipeLimit bytes wait; it fails once
// either side closed the pipe. The reader is woken by flush, or once
// linePipeChunk bytes wait.
func (p *linePipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	for len(p.buf) >= linePipeLimit && p.readErr == nil && p.err == nil {
		p.mu.Unlock()
		signal(p.avail)
		<-p.space
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	switch {
	case p.readErr != nil:
		return 0, p.readErr
	case p.err != nil:
		return 0, io.ErrClosedPipe
	}
	before := len(p.buf)
	p.buf = append(p.buf, b...)
	p.written += uint64(len(b))
	if before < linePipeChunk && len(p.buf) >= linePipeChunk {
		signal(p.avail) // a long burst goes out as it is written
	}
	return len(b), nil
}

// flush wakes the reader to take what is written.
func (p *linePipe) flush() { signal(p.avail) }

// Read takes what is written, as much as fits in b, waiting until there
// is some; io.EOF after the writer's close and all it wrote. Once the
// pipe is broken (CloseWithError) it takes nothing more.
func (p *linePipe) Read(b []byte) (int, error) {
	for {
		p.mu.Lock()
		if len(p.buf) > 0 && p.readErr == nil {
			n := copy(b, p.buf)
			p.taken += uint64(n)
			if n == len(p.buf) {
				p.buf, p.spare = p.spare[:0], p.buf[:0]
			} else {
				p.buf = p.buf[n:]
			}
			p.mu.Unlock()
			signal(p.space)
			return n, nil
		}
		err := p.err
		if p.readErr != nil {
			err = p.readErr
		}
		p.mu.Unlock()
		if err != nil {
			return 0, err
		}
		<-p.avail
	}
}

// counts returns how many bytes were written and how many the reader
// took.
func (p *linePipe) counts() (written, taken uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.written, p.taken
}

// Close is the reader's (the transport's, once the request is done):
// later writes fail.
func (p *linePipe) Close() error {
	p.CloseWithError(io.ErrClosedPipe)
	return nil
}

// CloseWithError breaks the pipe: later reads and writes fail with err.
func (p *linePipe) CloseWithError(err error) {
	p.mu.Lock()
	if p.readErr == nil {
		p.readErr = err
	}
	p.mu.Unlock()
	signal(p.avail)
	signal(p.space)
}

// closeWrite is the writer's close: the reader gets what was written and
// then io.EOF.
func (p *linePipe) closeWrite() {
	p.mu.Lock()
	if p.err == nil {
		p.err = io.EOF
	}
	p.mu.Unlock()
	signal(p.avail)
	signal(p.space)
}
