package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// procStats is a process's CPU time and memory as the kernel counts them
// (Linux's /proc), for sizing a pod's requests and limits.
type procStats struct {
	cpu       time.Duration // user and system time
	rss, peak int64         // resident memory now and at most so far (VmRSS, VmHWM), in bytes
}

// clockTick is the unit of /proc/PID/stat's times: USER_HZ, 100 on
// every Linux architecture Go builds for.
const clockTick = 10 * time.Millisecond

// readProcStats reads process pid's procStats.
func readProcStats(pid int) (procStats, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStats{}, err
	}
	// The fields after the command's closing parenthesis, from the
	// state (field 3): utime and stime are fields 14 and 15.
	_, rest, ok := strings.Cut(string(stat), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 13 {
		return procStats{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, stat)
	}
	var st procStats
	for _, f := range fields[11:13] {
		ticks, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return procStats{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		st.cpu += time.Duration(ticks) * clockTick
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStats{}, err
	}
	for line := range strings.Lines(string(status)) {
		name, value, _ := strings.Cut(line, ":")
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch name {
		case "VmRSS":
			st.rss = kb << 10
		case "VmHWM":
			st.peak = kb << 10
		}
	}
	if st.rss == 0 || st.peak == 0 {
		return procStats{}, fmt.Errorf("/proc/%d/status: no VmRSS or VmHWM", pid)
	}
	return st, nil
}
