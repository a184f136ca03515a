// Package hookrelaytest is hookrelay's public conformance suite. Every Queue,
// Ledger and Destinations implementation — the memory and SQL adapters and
// any a user writes — runs the same tests by handing Run a constructor that
// returns a fresh, empty instance per test:
//
//	func TestConformance(t *testing.T) {
//		hookrelaytest.Run(t, func(t *testing.T) hookrelaytest.Harness {
//			s := memory.NewStore()
//			return hookrelaytest.Harness{Queue: s, Ledger: s, Destinations: memory.NewDestinations()}
//		})
//	}
//
// The suite covers the queue contract (claims, leases, fencing, idempotent
// transitions, re-enqueue of records in any state), the ledger contract
// (records round-trip, attempt history, idempotent create, the refusals
// every store shares), the lease table of docs/adapters.md (every write and
// transition in every lease state), the Destinations contract, the
// LedgerQueue promises and whole-engine scenarios driven by a mock clock,
// including crash injection at every boundary of the state machine — once
// through fault-injecting wrappers and once on the store as it is, so a
// LedgerQueue runs on the worker's fast path — and the optional abilities
// (stats, lease ledger, batches, rooms, redrive, listing destinations for
// Publish, retention, recovery of unpublished broker messages, the
// destination guard's rate limit, hold and circuit breaker, wake-up
// announcements to workers in other processes), each of which skips when
// the adapter lacks it.
// docs/adapters.md states the contract the suite checks.
package hookrelaytest

import (
	"context"
	"testing"
	"time"

	"github.com/hookrelay/hookrelay"
)

// DestinationStore is a Destinations port that tests can also write to.
type DestinationStore interface {
	hookrelay.Destinations
	// Put adds or replaces a destination.
	Put(ctx context.Context, d hookrelay.Destination) error
	// SetPaused pauses or resumes a destination.
	SetPaused(ctx context.Context, id string, paused bool) error
}

// Harness is one fresh, empty set of adapters under test. Queue and Ledger
// may be the same value (memory, SQL) or different ones (a broker queue with
// a SQL ledger).
type Harness struct {
	Queue        hookrelay.Queue
	Ledger       hookrelay.Ledger
	Destinations DestinationStore
	// RedeliveryWithin is zero for a queue that shares the ledger's store
	// (memory, SQL): a delivery is claimable the moment the caller's clock
	// reaches its due time, and the tests check exactly that. A message
	// broker delays in real time and cannot follow a mock clock that jumps:
	// after RetryAt, Release or a skipped claim it hands the message out
	// again within a bounded real time (its adapter's longest delay, set
	// short in tests), and the ledger refuses it while it is not due. For
	// such a queue, set RedeliveryWithin to that bound plus a margin; the
	// tests that expect a delivery to come back then poll Claim for up to
	// this long instead of claiming once. Tests that expect nothing still
	// claim once.
	RedeliveryWithin time.Duration
	// NoDueAnnouncements, when set, says why the Queue's DueNotifier
	// never announces (a SQL store on a database without notifications,
	// whose ListenDue only waits for its context while the worker polls):
	// the DueNotifier cases skip with it. Leave it empty for a store that
	// announces; the cases then check that it does.
	NoDueAnnouncements string
	// DueAnnouncedWithin bounds the DueNotifier cases' wait for an
	// announcement that must come; zero means 20 s. It is a hang guard,
	// not a speed check: shorten it only for a store that announces in
	// process, so a broken one fails quickly.
	DueAnnouncedWithin time.Duration
}

// NewHarness returns a fresh, empty Harness for one test. It registers any
// cleanup with t.Cleanup.
type NewHarness func(t *testing.T) Harness

// Run runs every conformance test against the adapters newHarness builds.
func Run(t *testing.T, newHarness NewHarness) {
	t.Run("Queue", func(t *testing.T) { RunQueue(t, newHarness) })
	t.Run("Ledger", func(t *testing.T) { RunLedger(t, newHarness) })
	t.Run("Engine", func(t *testing.T) { RunEngine(t, newHarness) })
	t.Run("EngineLedgerQueue", func(t *testing.T) { RunEngineLedgerQueue(t, newHarness) })
	t.Run("LedgerQueue", func(t *testing.T) { RunLedgerQueue(t, newHarness) })
	t.Run("Leases", func(t *testing.T) { RunLeases(t, newHarness) })
	t.Run("Destinations", func(t *testing.T) { RunDestinations(t, newHarness) })
	t.Run("Stats", func(t *testing.T) { RunStats(t, newHarness) })
	t.Run("LeaseLedger", func(t *testing.T) { RunLeaseLedger(t, newHarness) })
	t.Run("BatchLedger", func(t *testing.T) { RunBatchLedger(t, newHarness) })
	t.Run("ClaimsByDestinationRoom", func(t *testing.T) { RunClaimsByDestinationRoom(t, newHarness) })
	t.Run("Redrive", func(t *testing.T) { RunRedrive(t, newHarness) })
	t.Run("Publish", func(t *testing.T) { RunPublish(t, newHarness) })
	t.Run("DestinationBatchReader", func(t *testing.T) { RunDestinationBatchReader(t, newHarness) })
	t.Run("UnstorableIDs", func(t *testing.T) { RunUnstorableIDs(t, newHarness) })
	t.Run("Retention", func(t *testing.T) { RunRetention(t, newHarness) })
	t.Run("UnpublishedRecovery", func(t *testing.T) { RunUnpublishedRecovery(t, newHarness) })
	t.Run("DestinationGuard", func(t *testing.T) { RunDestinationGuard(t, newHarness) })
	t.Run("DueNotifier", func(t *testing.T) { RunDueNotifier(t, newHarness) })
}
