// Package timers owns Trellis's durable timer scheduler: named timers that
// make a deferred call (package components) once their delay has passed,
// at least once, retried with backoff until the call succeeds — the Akka
// SDK's TimerScheduler. It owns the two stores (memory and Redis), the
// per-instance event loop and its call workers, retry backoff, the limits,
// leases, wipe detection, the admin queries (List, Get, Delete, Stats) as
// a Go API, and the scheduler's Prometheus metrics. The HTTP admin routes,
// /metrics and /readyz are wired by the server on top of this API.
//
// # Use
//
//	store := timers.NewRedisStore(redisClient, "trellis") // or timers.NewMemoryStore(nil)
//	sched, err := timers.New(store, componentClient, timers.Config{})
//	err = sched.Start(ctx)              // run due timers on this instance
//	defer sched.Shutdown(ctx)
//	// or sched.StartRetrying(time.Second): start now, or keep trying in
//	// the background while the store cannot be reached
//
//	call, _ := ExpireOrder.Deferred(orderID)
//	_, err = sched.Create(ctx, "order-expiration-"+orderID, 10*time.Second, call)
//	err = sched.Delete(ctx, "order-expiration-"+orderID) // a missing name is fine
//
//	// every day at 02:00 in Paris, each run retried up to 5 times
//	_, err = sched.CreateRecurring(ctx, "daily-report",
//		timers.Schedule{Cron: "0 2 * * *", TimeZone: "Europe/Paris"}, call, timers.WithMaxRetries(5))
//
// A [Scheduler] is a plain value, safe for concurrent use: endpoints,
// timed actions and entity callers share one. A callee that must not act
// twice reads [FiringFromContext] — (name, generation, attempt) — and
// deduplicates on it.
//
// # Semantics
//
//   - A name is unique in its store, so across every instance on one
//     Redis or Redis Cluster. Creating an existing name replaces it in one
//     atomic step (a name always lives in the same one of the Redis
//     store's 16 partitions, so the replace is one script there).
//   - At least once: a timer is removed only after its call succeeded.
//     A failed call — an error effect, a panic, an unknown component or
//     method, an argument that no longer decodes, a timeout — is retried
//     after 3 s, 6 s, 12 s, 24 s, then every 30 s ([Backoff]). With
//     maxRetries n > 0 the timer gives up when call 1+n fails: it leaves
//     the active timers for the dead letters (logged at error level,
//     counted in trellis_timers_given_up_total); 0 retries forever. The
//     attempt count and the last error stay with the timer.
//   - Never early: due-ness is decided by the store on one clock — Redis
//     TIME in the Redis store, read inside the scripts (on a cluster, the
//     TIME of the master that holds the timer's partition, the same one
//     for its create and its claims) — with due times
//     rounded up and "now" rounded down to the millisecond, so skewed
//     instance clocks cannot make a timer run early. Both stores accept an
//     injected clockwork.Clock for deterministic tests.
//   - Limits, enforced atomically, refused with a *[LimitError] naming the
//     limit and the value: a serialized argument of at most 1,024 bytes,
//     at most 50,000 timers per store (a replacement does not count
//     twice); both can be configured lower ([Config]). On Redis the count
//     spans the partitions: exact for creates that do not race, and
//     creates of new names racing in different partitions can overshoot
//     by their number minus one (see [RedisStore]).
//
// # Dead letters
//
// A timer that gave up is kept as a [DeadLetter], by name, with its call,
// payload, attempts, last error and the time it died, for
// Config.DeadLetterRetention (7 days by default). Dead letters are not
// active timers: they do not run, and do not count toward MaxActive.
// [Scheduler.ListDeadLetters] pages through them (oldest death first),
// [Scheduler.RetryDeadLetter] makes one an active timer again, due now
// with fresh retries (refused while an active timer has the name, or at
// the limit), and [Scheduler.DeleteDeadLetter] removes one. The running
// loop prunes the expired ones, a bounded batch per pass, once a minute
// (at once again while a pass found a full batch). Stats.DeadLetters and
// the trellis_timers_dead_letters gauge count them.
//
// # Recurring timers
//
// [Scheduler.CreateRecurring] stores a timer that runs on a [Schedule]: an
// interval (at least 1 s) or a cron expression (robfig/cron/v3's parser)
// in a time zone, with a start, an end, jitter, and overlap and catch-up
// policies. It is one stored timer (it counts once toward MaxActive): when
// a run ends — its call succeeded, its catch-up policy skipped it, or it
// gave up and left a dead letter named "<name>@<run time>~<k>" — the
// store moves it, atomically, to its next run with a new generation and no
// attempts, so a [Firing] names the run (Firing.Run is its scheduled
// time). [Scheduler.Pause] and [Scheduler.Resume] stop and restart it.
// docs/timers.md has the rules (DST, policies).
//
// # Export and import
//
// [Scheduler.Export] walks every timer (active, recurring, dead) as
// [ExportRecord]s; [Scheduler.Import] stores them back in order (names and
// due times kept, generations fresh), reporting the lines it refused, with
// a dry run; [Scheduler.ExportLegacy] reads the key layout of the versions
// before the partitions.
//
// # Several instances: claims, leases, generations
//
// A due timer is claimed by exactly one instance: the claim script takes
// a batch of due timers and moves each to now+lease in the due-time
// sorted set, which hides it from other claims. The instance reports the
// outcome (complete, or fail-and-reschedule) before the lease ends; if it
// dies, the lease expires, the timer is due again, and another instance
// runs it as the next attempt. The lease (≤ 30 s) is longer than the call
// timeout, so a live instance always reports in time. Such a run is
// counted in trellis_timers_lease_expired_runs_total, and every call is
// logged at debug level ("timer firing": timer, generation, attempt,
// leaseExpired), so that a duplicate can be told from a retry.
//
// Every create gets a new generation from a counter of its partition
// (store-wide in the memory store), so a name's generations only grow.
// Complete
// removes a timer only if its generation still matches, so the success of
// a replaced timer's old call cannot delete the replacement; fail also
// checks the attempt, so the late failure of a run whose lease expired
// cannot reschedule a timer another instance is running.
//
// # The loop
//
// One goroutine per instance claims (loop.go), a fixed pool of workers
// calls (worker.go), one reporter writes outcomes back in batches. The
// loop sleeps exactly until the earliest due time the claim reported —
// no fixed polling interval — and is woken early through a coalescing
// one-slot channel by a create that is due sooner: locally at once, and
// from other instances through a Redis pub/sub channel that the create
// script publishes to only when the new timer becomes the earliest.
// Config.IdleCheck (1 s) bounds the sleep as a safety net for a lost
// pub/sub message and for wipe detection; it is not how timers fire.
//
// Backpressure: the loop claims at most as many timers as there are idle
// workers, so a burst of 50,000 due timers is drained batch by batch by
// Config.Workers goroutines, and the rest wait in the store under no lease.
//
// Shutdown stops claiming, releases claimed timers not yet started,
// waits for calls in flight until its context ends (then cancels and
// releases them: due again at once, no failure recorded), writes the
// outcomes, and closes the subscription, leaving no goroutine behind.
//
// # Wiped Redis
//
// Start writes a marker key in every partition; every claim checks them.
// If one is gone, Redis (on a cluster: the master holding that partition)
// was flushed or restarted without persistence and the timers stored
// there before are lost: the scheduler logs it at error level (again every
// minute), Ready returns a *[WipedError] for /readyz, and the
// trellis_timers_store_wiped gauge is 1, until [Scheduler.AcknowledgeWipe]
// or a restart. Timers created since are run. (A wipe while no instance
// runs is reported at the next start only as a warning: a fresh store
// looks the same.)
//
// # Redis memory
//
// Per pending timer: one sorted-set entry, one hash field holding a
// compact record (header, call) and one holding its state (generation,
// attempts, last attempt, due time, last error), no key of its own.
// Running a timer rewrites only its state, and a claim reads only states
// in Lua, never the 1 KB record (see redisscripts.go). A 1 KB call is
// stored Huffman-compressed (storedcall.go), which keeps it under
// jemalloc's 1,024-byte size class. Measured: 1,163–1,166 bytes of
// used_memory per pending timer with a 1,024-byte random base64 argument
// (1,460 uncompressed), of which the state is about 90. A timer created
// inside a traced span keeps its W3C trace context too (tracectx.go):
// 1,292 bytes measured with tracing on.
//
// # Benchmark
//
// BenchmarkTimers (bench_test.go) runs the timers' workloads on a Redis of
// its own: go test -run '^$' -bench Timers -benchtime 1x ./timers/
// (-timers.fireprofile FILE writes a CPU profile of the firing alone)
// (BenchmarkClusterTimerBurst runs the 50,000-timer burst on one Redis and on
// a 3-master cluster of its own, and prints each master's share of the
// commands.)
package timers
