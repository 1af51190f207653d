// Package slab hands out pointers to fresh values carved from blocks.
package slab

import "sync/atomic"

// Size is how many values one slab block holds: a stream of messages
// costs one allocation per Size of them. Small, because a block stays
// in memory while any of its values is referenced (an unconfirmed message,
// a message in a consumer controller's stash): at most Size-1 values
// more than are in use.
const Size = 16

// Slab hands out pointers to fresh zero values of T carved from blocks, for
// messages that are sent by pointer and never modified once sent. Safe for
// concurrent use: the producer controller's adapters run on their callers'
// goroutines.
type Slab[T any] struct {
	cur atomic.Pointer[slabBlock[T]]
}

type slabBlock[T any] struct {
	taken atomic.Int32 // values handed out, or claimed by racing callers
	items [Size]T
}

// Get returns a pointer to a zero T that no other caller gets.
func (s *Slab[T]) Get() *T {
	for {
		b := s.cur.Load()
		if b != nil {
			if i := b.taken.Add(1) - 1; i < Size {
				return &b.items[i]
			}
		}
		fresh := new(slabBlock[T])
		fresh.taken.Store(1)
		if s.cur.CompareAndSwap(b, fresh) {
			return &fresh.items[0]
		}
	}
}
