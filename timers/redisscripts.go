package timers

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The Redis store's scripts. Every change that touches more than one key
// (or reads then writes) is one script, so Redis runs it with nothing in
// between: that is what makes the limit, the claim and the generation
// checks atomic across instances.
//
// Times are integer milliseconds. A script's "now" is ARGV[1]: the
// injected clock's time, or "" to read Redis TIME, the one clock every
// instance shares (rounded up when it sets a due time, down when it
// decides due-ness, so nothing is ever claimed early, not even by a
// fraction of a millisecond). Numbers cross the Lua boundary as decimal
// strings, formatted with %.0f: Lua numbers are doubles and tostring
// would switch to exponent notation.
//
// A record (the value in the data hash) is
//
//	generation:createdMs:maxRetries:dueMs:attempts:lastAttemptMs:errLen:<err><call>
//
// six decimal fields, the error's length, the error, then the call's
// stored form. One string per timer rather than a hash per timer: a
// 1 KB call would turn a small hash into a real hash table, and every
// Redis key costs its own overhead on top (see the memory figures in
// doc.go). A record is written once, when its timer is created (or a
// recurring one moves to its next run, with a new generation). What
// changes as the timer runs is its state (the value in the state hash):
//
//	generation:dueMs:attempts:lastAttemptMs:errLen:<err>
//
// written with the record and at every attempt, which overrides the
// record's header. So a claim, a completion or a retry reads and writes
// a few dozen bytes in Lua, never the 1 KB record: Redis hashes every
// byte of a string that enters Lua, which for a 1 KB record costs more
// than the rest of a claim, so the claim's caller reads the records
// itself, outside Lua (readRecords). Timers stored by earlier versions
// may have no state, or a record in the legacy form (attempts in the
// header): the scripts read those records' headers instead.
//
//go:embed lua/prelude.lua
var luaPrelude string

// A dead letter (the value in the dead hash) is
//
//	diedMs:<record>
//
// the time it gave up, then its record as above with the header (due
// time, attempts, last attempt, error) of its last attempt: one string,
// whole, since a dead letter no longer changes.
//
// Every script runs on one partition: it gets KEYS[1] the partition's due
// sorted set, KEYS[2] its data hash, KEYS[3] its failing set, KEYS[4] its
// state hash; more keys (of the same partition) are listed per script.
// The scripts that settle, count or prune get KEYS[5] the dead-letter hash
// and KEYS[6] the dead letters' sorted set (name → diedMs); those that
// settle KEYS[7] the generation counter too.
//
// A recurring timer's call (the end of its record) starts with its
// recurrence: "\x02", the length of its JSON, ':', the JSON, then the
// call's stored form (recurring.go).
var (
	// createTimerWithLimit: KEYS[5] generation counter, KEYS[6…] the data
	// hashes of other partitions to count here (on one Redis: all of
	// them); ARGV[1] now, ARGV[2] delayMs, ARGV[3] maxActive, ARGV[4]
	// maxRetries, ARGV[5] name, ARGV[6] stored call, ARGV[7] wake channel,
	// ARGV[8] the number of timers in the other partitions not in KEYS
	// (counted by the caller), ARGV[9] the partition's index.
	// Replaces a timer of the same name (which therefore does not count
	// against the limit), and publishes the due time on the wake channel
	// when the new timer is now the earliest, so that sleeping loops on
	// other instances re-plan. Returns {'ok', gen, nowMs, dueMs} or
	// {'limit', active}.
	createTimerWithLimit = script(createSrc)

	// claimDueTimers: KEYS[5] marker; ARGV[1] now, ARGV[2] max (may be
	// 0), ARGV[3] leaseMs. Takes up to max timers due by now, counts the
	// attempt in their states, and moves each to now+lease in the sorted
	// set: that is the lease. An instance that never reports lets it
	// expire, and the timer is due again for everyone. Returns {nowMs,
	// waitMs, markerExists, name, state, leaseExpired, …}; waitMs
	// is until the earliest remaining score, -1 when there is none.
	// leaseExpired is 1 when the timer's score was past its due time:
	// every write but a claim puts the score at the due time, so that is a
	// lease that ran out.
	claimDueTimers = script(claimSrc)

	// completeTimers: ARGV pairs of name, generation. Removes each timer
	// whose generation still matches: a replaced timer has a new one, so
	// the old run's success cannot delete it. Returns 1 or 0 per pair.
	completeTimers = script(completeSrc)

	// rescheduleFailedTimers: ARGV[1] now, then groups of name,
	// generation, attempt, retryAfterMs ('-1': give up, moving the timer
	// to the dead letters), error.
	// Only the timer's current attempt may reschedule it: a run whose
	// lease expired and was claimed again (attempt moved on), or whose
	// timer was replaced (generation moved on), changes nothing. Returns
	// per group 0 (stale), 1 (rescheduled) or 2 (gave up, removed).
	rescheduleFailedTimers = script(rescheduleSrc)

	// releaseTimers: ARGV[1] now, then triples of name, generation,
	// attempt. Makes each still-current attempt due now again, without
	// recording a failure: a stopping instance hands its work back. Returns
	// 1 or 0 per triple: released, or no longer that attempt.
	releaseTimers = script(releaseSrc)

	// deleteTimer: ARGV[1] name. Removes it from all four keys.
	deleteTimer = script(deleteSrc)

	// countTimers: ARGV[1] now, ARGV[2] horizonMs. Returns {active,
	// failing, due within the horizon, dead letters}, read at one instant.
	countTimers = script(countSrc)

	// reviveDeadLetter: KEYS[5] dead hash, KEYS[6] dead sorted set,
	// KEYS[7] generation counter, KEYS[8…] as create's KEYS[6…]; ARGV[1]
	// now, ARGV[2] maxActive, ARGV[3] name, ARGV[4] wake channel, ARGV[5]
	// and ARGV[6] as create's ARGV[8] and ARGV[9]. Makes the dead letter
	// an active timer due now (create's insert, with its call and
	// maxRetries) and removes it. Returns create's reply plus maxRetries
	// and the stored call, {'missing'}, or {'exists'} when an active timer
	// has the name.
	reviveDeadLetter = script(reviveSrc)

	// pruneDeadLetters: ARGV[1] now, ARGV[2] retentionMs, ARGV[3] max.
	// Removes up to max dead letters that died retention or more ago;
	// returns how many.
	pruneDeadLetters = script(pruneSrc)

	// deleteDeadLetter: ARGV[1] name. Removes it from KEYS[5] and KEYS[6].
	deleteDeadLetter = script(deadDeleteSrc)

	// advanceRecurringTimers: KEYS[7] generation counter; ARGV[1] now,
	// then groups of name, generation, attempt ('' any), next due ms (''
	// when the schedule ended: remove the timer), the next run's
	// recurrence JSON, dead-letter name ('' when the run succeeded),
	// error. For each timer still at that firing: writes the dead letter
	// of the run (its call without the recurrence), then rewrites the
	// record for the next run (a new generation, no attempts, the new
	// recurrence, the same call) or removes it. Returns per group 0
	// (stale), 1 (advanced) or 2 (ended).
	advanceRecurringTimers = script(advanceSrc)

	// putDeadLetter: KEYS[7] generation counter; ARGV[1] name, ARGV[2]
	// createdMs, ARGV[3] maxRetries, ARGV[4] dueMs, ARGV[5] attempts,
	// ARGV[6] lastAttemptMs, ARGV[7] error, ARGV[8] stored call, ARGV[9]
	// diedMs. Stores the dead letter with a new generation (an import).
	putDeadLetter = script(putDeadSrc)
)

// The scripts' source, each run after luaPrelude.
var (
	//go:embed lua/create.lua
	createSrc string
	//go:embed lua/claim.lua
	claimSrc string
	//go:embed lua/complete.lua
	completeSrc string
	//go:embed lua/reschedule.lua
	rescheduleSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/delete.lua
	deleteSrc string
	//go:embed lua/count.lua
	countSrc string
	//go:embed lua/revive.lua
	reviveSrc string
	//go:embed lua/prune.lua
	pruneSrc string
	//go:embed lua/deaddelete.lua
	deadDeleteSrc string
	//go:embed lua/advance.lua
	advanceSrc string
	//go:embed lua/putdead.lua
	putDeadSrc string
)

// script is the Redis script of src after luaPrelude.
func script(src string) *redis.Script { return redis.NewScript(luaPrelude + src) }
