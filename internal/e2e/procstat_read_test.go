package e2e

import (
	"os"
	"testing"
)

// TestReadProcStats: this process's own memory is read, its peak no
// less than its present; a process that does not exist is an error.
func TestReadProcStats(t *testing.T) {
	st, err := readProcStats(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.rss <= 0 || st.peak < st.rss || st.cpu < 0 {
		t.Errorf("%+v: want a resident size, a peak at least that, a CPU time", st)
	}
	if _, err := readProcStats(-1); err == nil {
		t.Error("no error for a process that does not exist")
	}
}
