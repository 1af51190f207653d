// Package workflows owns workflows: a persisted state machine per id, as
// the Akka SDK's Workflow component (not a replay of a history). A
// workflow type has a state type, commands that return effects, and steps
// that may do I/O and return step effects. It is defined once, next to
// them:
//
//	var Transfers = workflows.Define("transfer", func(id string) Transfer { return Transfer{} })
//
//	var Begin = workflows.Command(Transfers, "begin",
//		func(ctx *workflows.Ctx[Transfer, Transfer], s Transfer, req Transfer) workflows.Effect[Transfer, Transfer] {
//			if ctx.Status() != workflows.StatusNotStarted {
//				return ctx.Conflict("transfer %s has started already", ctx.WorkflowID())
//			}
//			return ctx.UpdateState(req).TransitionTo("withdraw", req.Amount).ThenReply(req)
//		})
//
//	func init() {
//		workflows.Step(Transfers, "withdraw",
//			func(ctx *workflows.StepCtx[Transfer], s Transfer, amount int) workflows.StepEffect[Transfer] {
//				if _, err := Debit.Invoke(ctx.Context(), ctx.Client(), s.From, amount); err != nil {
//					return ctx.Fail("withdraw: %v", err) // retried, then the failover step
//				}
//				return ctx.UpdateState(s).TransitionTo("deposit", amount)
//			}, workflows.FailoverTo("refund", nil))
//		...
//	}
//
// and started in a service with Transfers.Start(host.Workflows()); callers
// then write Begin.Invoke(ctx, client, "t-1", req) on any instance. Steps
// are named by strings in transitions (Go's package initialization forbids
// step handles that refer to each other); a transition to a step the
// workflow does not have is refused (a command's) or fails the step.
//
// # The record
//
// An instance is one record: its state, its status (StatusRunning,
// StatusPaused, StatusEnded, StatusFailed), its current step and that
// step's input, the failed attempts of that step, its transition number,
// and its last transitions (a bounded history). The record is the state of
// an internal key-value entity of the workflow's component id, so it is
// written as an entity's is: one write per command or step outcome, under
// the shard's fence, with the change in the shard's change log in the same
// script (ShardedRedisStore), commands forwarded to the shard's owner and
// run one at a time there.
//
// # Running the steps
//
// The owner of an instance's shard runs its current step, outside the
// commands' path: a command that moves the workflow to a step wakes the
// runner of this instance, which reads the record (its read queues behind
// the write on the entity), runs the step, and commits its outcome as an
// internal command that applies it only while the record's transition is
// still the one the step ran under (a command that moved the workflow
// meanwhile wins; the outcome is dropped). When an instance starts serving
// a shard (at start, after a kill -9 of the previous owner, or a shard
// move) its runner reads the shard's records of the type from the store
// (entities.ChangeLog.Current) and resumes each running instance at its
// current step: nothing is replayed.
//
// # What runs again, what is applied once
//
// A step runs again when its outcome was not committed: its instance
// crashed or stopped during it, its shard moved, or it failed and is
// retried. Its run has a stable id, StepKey(workflow, id, run, step,
// transition): the same for every attempt of the step under one
// transition and after a crash, different for any other step run. The
// step's context carries it (components.WithIdempotencyKey), so an entity
// command the step invokes with that context is applied once and a run
// again is answered with the first answer; a step passes it on to other
// systems (StepCtx.IdempotencyKey, an Idempotency-Key header). A step that
// invokes one command of one entity twice derives a key per call.
//
// # Timeouts, retries, failover, pause
//
// A run past its step's timeout (DefaultStepTimeout, or StepTimeout) fails;
// a failed run is retried after its backoff (Retries; DefaultMaxRetries,
// DefaultBackoff doubling up to DefaultMaxBackoff), the wait kept in the
// record so that it survives a restart; a step out of retries goes to its
// failover step (FailoverTo), else the workflow fails. A workflow with a
// Timeout goes to its timeout step (or fails) once the time has passed. A
// paused workflow waits for a command; PauseFor also arms a Trellis timer
// (TimerName) that moves it to a step when the pause lapses.
package workflows
