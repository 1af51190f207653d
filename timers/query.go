package timers

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The page sizes of [ListQuery.Limit].
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// ListQuery selects timers for [Scheduler.List]. Filters combine with AND.
type ListQuery struct {
	// NameContains keeps timers whose name contains it ("" keeps all).
	NameContains string
	// Failing keeps only timers whose last call failed.
	Failing bool
	// ComponentID, Method and EntityID, when not "", keep the timers
	// whose call goes to that component, runs that method, or addresses
	// that entity (exact matches).
	ComponentID, Method, EntityID string
	// Recurring keeps only the recurring timers.
	Recurring bool
	// Upcoming, when positive, keeps only timers that will run within it
	// from now (due, or with an expired lease, by then).
	Upcoming time.Duration
	// Limit is the page size: 0 means 100; above 1,000 is ErrInvalidQuery.
	Limit int
	// Cursor continues from a previous page's NextCursor; "" starts at the
	// beginning. It is opaque; pass the same filters with it.
	Cursor string
}

// Page is one page of timers.
//
// Timers are listed in the order they will run: by next run time (the due
// time, or the lease's expiry while a call is in flight), then by name.
// Following NextCursor to its end lists every timer that exists for the
// whole walk and does not move (run, fail, or get replaced) exactly once.
// A page may hold fewer than Limit timers, even none, while NextCursor is
// not empty: a filtered walk stops after examining a bounded number of
// timers, so that one request cannot hold the store for long.
type Page struct {
	Timers []Timer
	// NextCursor continues the walk; "" when it is done.
	NextCursor string
}

// Stats are the store-wide counts of [Scheduler.Stats].
type Stats struct {
	// Active is the number of timers stored (pending, failing or running).
	Active int
	// Failing is the number whose last call failed.
	Failing int
	// Limit is the configured MaxActive.
	Limit int
	// DueWithin1m is the number due (or whose lease expires) within a
	// minute from now, those already due included.
	DueWithin1m int
	// DeadLetters is the number of dead letters kept (not counted in
	// Active nor toward Limit).
	DeadLetters int
}

// listQuery is a validated ListQuery.
type listQuery struct {
	nameContains string
	failing      bool
	// component, method and entity are ListQuery's call filters.
	component, method, entity string
	recurring                 bool
	upcoming                  time.Duration
	limit                     int
	// after is the cursor's position: list what sorts after it.
	after    position
	hasAfter bool
}

// position is a place in the run order: (score, name).
type position struct {
	score int64
	name  string
}

// less orders positions as the Redis sorted set does: by score, then by
// name bytewise.
func (p position) less(q position) bool {
	if p.score != q.score {
		return p.score < q.score
	}
	return p.name < q.name
}

// cursorVersion starts every cursor, so that the format can change.
const cursorVersion = "t1:"

func encodeCursor(p position) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + strconv.FormatInt(p.score, 10) + ":" + p.name))
}

func decodeCursor(c string) (position, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return position{}, fmt.Errorf("%w: cursor is not one this API returned", ErrInvalidQuery)
	}
	rest, ok := strings.CutPrefix(string(raw), cursorVersion)
	if !ok {
		return position{}, fmt.Errorf("%w: cursor is not one this API returned", ErrInvalidQuery)
	}
	scoreText, name, ok := strings.Cut(rest, ":")
	score, err := strconv.ParseInt(scoreText, 10, 64)
	if !ok || err != nil {
		return position{}, fmt.Errorf("%w: cursor is not one this API returned", ErrInvalidQuery)
	}
	return position{score: score, name: name}, nil
}

func (q ListQuery) validate() (listQuery, error) {
	lq := listQuery{nameContains: q.NameContains, failing: q.Failing, upcoming: q.Upcoming, limit: q.Limit,
		component: q.ComponentID, method: q.Method, entity: q.EntityID, recurring: q.Recurring}
	switch {
	case q.Limit < 0 || q.Limit > MaxListLimit:
		return lq, fmt.Errorf("%w: limit %d is not in [1, %d]", ErrInvalidQuery, q.Limit, MaxListLimit)
	case q.Limit == 0:
		lq.limit = DefaultListLimit
	}
	if q.Upcoming < 0 {
		return lq, fmt.Errorf("%w: negative upcoming %v", ErrInvalidQuery, q.Upcoming)
	}
	if q.Cursor != "" {
		p, err := decodeCursor(q.Cursor)
		if err != nil {
			return lq, err
		}
		lq.after, lq.hasAfter = p, true
	}
	return lq, nil
}

// matchesName and matchesTimer apply the filters that need the name and
// the stored timer.
func (q listQuery) matchesName(name string) bool {
	return q.nameContains == "" || strings.Contains(name, q.nameContains)
}

func (q listQuery) matchesTimer(t Timer) bool {
	return (!q.failing || t.Failing()) && (!q.recurring || t.Recurring != nil) &&
		(q.component == "" || t.Call.ComponentID == q.component) &&
		(q.method == "" || t.Call.Method == q.method) &&
		(q.entity == "" || t.Call.EntityID == q.entity)
}
