package slab

import (
	"sync"
	"testing"
)

// Callers racing for slab values each get their own zero value, and a
// block serves slabSize of them.
func TestSlab(t *testing.T) {
	const callers, each = 4, 1000
	var s Slab[[2]int]
	got := make([][]*[2]int, callers)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				v := s.Get()
				if *v != [2]int{} {
					t.Errorf("got %v, want a zero value", *v)
				}
				v[0] = c + 1 // a value handed out twice would be written twice
				got[c] = append(got[c], v)
			}
		}()
	}
	wg.Wait()
	seen := make(map[*[2]int]bool)
	for c, vs := range got {
		for _, v := range vs {
			if seen[v] {
				t.Fatalf("a value was handed out twice")
			}
			seen[v] = true
			if v[0] != c+1 {
				t.Fatalf("caller %d's value was written by caller %d", c+1, v[0])
			}
		}
	}
	allocs := testing.AllocsPerRun(10, func() {
		for range Size {
			s.Get()
		}
	})
	if allocs != 1 {
		t.Fatalf("%v allocations per %d values, want 1", allocs, Size)
	}
}
