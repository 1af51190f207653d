package testenv

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisInfo is what a benchmark reads of INFO, summed over the servers.
type RedisInfo struct {
	UsedMemory int64
	// CPU is used_cpu_sys + used_cpu_user.
	CPU time.Duration
	// calls and usec are INFO commandstats per command.
	calls, usec map[string]int64
}

// ReadRedisInfo reads INFO memory, cpu and commandstats of every server
// (one Redis, or a cluster's masters) and sums them.
func ReadRedisInfo(tb testing.TB, c redis.UniversalClient) RedisInfo {
	info := RedisInfo{calls: map[string]int64{}, usec: map[string]int64{}}
	var mu sync.Mutex
	read := func(ctx context.Context, m *redis.Client) error {
		text, err := m.Info(ctx, "memory", "cpu", "commandstats").Result()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for line := range strings.Lines(text) {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			switch {
			case k == "used_memory":
				n, _ := strconv.ParseInt(v, 10, 64)
				info.UsedMemory += n
			case k == "used_cpu_sys" || k == "used_cpu_user":
				f, _ := strconv.ParseFloat(v, 64)
				info.CPU += time.Duration(f * float64(time.Second))
			case strings.HasPrefix(k, "cmdstat_"):
				// cmdstat_evalsha:calls=123,usec=4567,…
				for field := range strings.SplitSeq(v, ",") {
					name, n, _ := strings.Cut(field, "=")
					x, _ := strconv.ParseInt(n, 10, 64)
					switch name {
					case "calls":
						info.calls[strings.TrimPrefix(k, "cmdstat_")] += x
					case "usec":
						info.usec[strings.TrimPrefix(k, "cmdstat_")] += x
					}
				}
			}
		}
		return nil
	}
	var err error
	if cl, ok := c.(*redis.ClusterClient); ok {
		err = cl.ForEachMaster(context.Background(), read)
	} else {
		err = read(context.Background(), c.(*redis.Client))
	}
	if err != nil {
		tb.Fatalf("INFO: %v", err)
	}
	return info
}

// CommandsSince describes the commands Redis ran since before, busiest
// first: calls, and microseconds per call.
func (r RedisInfo) CommandsSince(before RedisInfo) string {
	type row struct {
		name        string
		calls, usec int64
	}
	var rows []row
	for name, n := range r.calls {
		if d := n - before.calls[name]; d > 0 && name != "info" {
			rows = append(rows, row{name, d, r.usec[name] - before.usec[name]})
		}
	}
	slices.SortFunc(rows, func(x, y row) int { return int(y.usec - x.usec) })
	var parts []string
	for _, r := range rows {
		parts = append(parts, fmt.Sprintf("%s %d calls %.1f µs/call", r.name, r.calls, float64(r.usec)/float64(r.calls)))
	}
	return strings.Join(parts, "; ")
}
