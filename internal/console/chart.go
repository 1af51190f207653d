package console

import (
	"context"
	"fmt"
	"time"

	"github.com/trellis-go/trellis/timers"
)

// The chart of timers due over the next hour: twelve bars of five
// minutes, and one more for the timers already due (overdue, or running).
const (
	chartSpan    = time.Hour
	chartBucket  = 5 * time.Minute
	chartBuckets = int(chartSpan / chartBucket)
)

// maxChartTimers bounds the timers one chart reads, so that a refresh
// cannot walk a whole store of due timers: past it the chart is partial.
const maxChartTimers = 10_000

// dueChart is the chart as the page draws it.
type dueChart struct {
	// BucketSeconds is the width of one bar.
	BucketSeconds int `json:"bucketSeconds"`
	// Overdue counts the timers due at or before now: late, or running.
	Overdue int `json:"overdue"`
	// Counts[i] counts the timers due in (now + i×bucket, now + (i+1)×bucket].
	Counts []int `json:"counts"`
	// Partial is true when the store held more timers due within the hour
	// than one chart reads: the counts are then a lower bound.
	Partial bool `json:"partial"`
}

// chartDue counts the timers due within chartSpan of now, by bucket,
// reading at most limit timers through the scheduler's list query (which
// reads a bounded number per call, so the store is not held for long).
func chartDue(ctx context.Context, t Timers, now time.Time, limit int) (dueChart, error) {
	c := dueChart{BucketSeconds: int(chartBucket.Seconds()), Counts: make([]int, chartBuckets)}
	q := timers.ListQuery{Upcoming: chartSpan, Limit: timers.MaxListLimit}
	for read := 0; ; {
		page, err := t.List(ctx, q)
		if err != nil {
			return dueChart{}, fmt.Errorf("chart the due timers: %w", err)
		}
		for _, tm := range page.Timers {
			if i := bucketOf(tm.DueAt.Sub(now)); i < 0 {
				c.Overdue++
			} else {
				c.Counts[i]++
			}
		}
		read += len(page.Timers)
		if page.NextCursor == "" {
			return c, nil
		}
		if read >= limit {
			c.Partial = true
			return c, nil
		}
		q.Cursor = page.NextCursor
	}
}

// bucketOf is the bar of a timer due in d: -1 when it is due already,
// else the five minutes it falls in. The store decides what "within the
// hour" is on its own clock, so a timer a little past the hour on ours
// lands in the last bar rather than nowhere.
func bucketOf(d time.Duration) int {
	if d <= 0 {
		return -1
	}
	return min(int((d-1)/chartBucket), chartBuckets-1)
}
