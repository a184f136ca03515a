package hookrelaytest

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// dueWait bounds the wait for an announcement that must come unless
// Harness.DueAnnouncedWithin says otherwise: a hang guard, not a speed
// check (PostgreSQL delivers a notification in milliseconds).
const dueWait = 20 * time.Second

// dueQuiet is how long a "must not" case waits for an announcement that
// must not come. A wrong call that comes later still is not caught: the
// bound keeps the suite's run time, and a store that misbehaves at all
// usually does so within it.
const dueQuiet = 500 * time.Millisecond

// heard is one announcement as a listener took it: the time announced
// and, when the listener was armed (dueListener.arm), the IDs a Claim
// made on hearing it returned.
type heard struct {
	at      time.Time
	armed   bool
	claimed []string
	err     error
}

// dueListener runs ListenDue as a worker does: due hands the time to the
// listener's own worker goroutine, which, when armed, claims at once —
// at the announced time, or at the armed time for an announcement of work
// due now (the zero time) — as a worker woken by it would. A store that
// announces work before its write is visible to a Claim is caught there.
type dueListener struct {
	t       *testing.T
	wait    time.Duration
	raw     chan time.Time
	out     chan heard
	dropped atomic.Int64
	mu      sync.Mutex
	armAt   time.Time
	armed   bool
	cancel  context.CancelFunc
	done    chan error
	quit    chan struct{}
	stopped chan struct{}
	stop    func() error
}

// listenDue starts a listener on n; t's cleanup stops it. Claims are made
// on q.
func listenDue(t *testing.T, h Harness, n hookrelay.DueNotifier) *dueListener {
	q := h.Queue
	ctx, cancel := context.WithCancel(context.Background())
	l := &dueListener{
		t: t, wait: cmp.Or(h.DueAnnouncedWithin, dueWait), raw: make(chan time.Time, 1024), out: make(chan heard, 1024),
		cancel: cancel, done: make(chan error, 1), quit: make(chan struct{}), stopped: make(chan struct{}),
	}
	go func() {
		l.done <- n.ListenDue(ctx, func(at time.Time) {
			select {
			case l.raw <- at:
			default:
				l.dropped.Add(1)
			}
		})
	}()
	go func() {
		defer close(l.stopped)
		for {
			select {
			case <-l.quit:
				return
			case at := <-l.raw:
				h := heard{at: at}
				l.mu.Lock()
				h.armed, l.armed = l.armed, false
				now := l.armAt
				l.mu.Unlock()
				if h.armed {
					if !at.IsZero() {
						now = at
					}
					var cs []hookrelay.Claim
					cs, h.err = q.Claim(context.Background(), hookrelay.ClaimParams{Now: now, Limit: 10, LeaseFor: leaseFor, Holder: "listener"})
					h.claimed = ids(cs)
				}
				l.out <- h
			}
		}
	}()
	var once sync.Once
	var stopErr error
	l.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-l.done:
			case <-time.After(l.wait): // a hang guard, not a speed check
				l.t.Errorf("ListenDue did not return within %v of its context ending", l.wait)
			}
			close(l.quit)
			<-l.stopped
		})
		return stopErr
	}
	t.Cleanup(func() { _ = l.stop() })
	return l
}

// arm makes the listener claim on the next announcement it hears, at the
// announced time or, for the zero time, at now.
func (l *dueListener) arm(now time.Time) {
	l.mu.Lock()
	l.armed, l.armAt = true, now
	l.mu.Unlock()
}

// next waits for the next announcement (what: the work it must be for).
func (l *dueListener) next(what string) heard {
	l.t.Helper()
	select {
	case h := <-l.out:
		require.Zero(l.t, l.dropped.Load(), "announcements overflowed the test's buffer")
		return h
	case <-time.After(l.wait): // a hang guard, not a speed check
		l.t.Fatalf("no announcement within %v: %s", l.wait, what)
		return heard{}
	}
}

// listening starts a listener and waits for the announcement it makes
// once it is listening, so what the test writes after reaches it.
func listening(t *testing.T, h Harness, n hookrelay.DueNotifier) *dueListener {
	t.Helper()
	l := listenDue(t, h, n)
	got := l.next("ListenDue announces work due now (the zero time) once it is listening, for whatever was announced while no one listened")
	assert.True(t, got.at.IsZero(), "the announcement made once listening is of work due now (the zero time), not %v", got.at)
	return l
}

// assertAnnounced waits for the announcement of the work the test just
// wrote, which the listener was armed for: delivery id, due at due. later
// says the work is due in the future, so an announcement of "now" (the
// zero time) is wrong.
func assertAnnounced(t *testing.T, l *dueListener, id string, due time.Time, later bool, what string) {
	t.Helper()
	h := l.next(what)
	require.True(t, h.armed, "the test armed the listener for this announcement")
	require.NoError(t, h.err, "the claim made on hearing it")
	if later {
		assert.False(t, h.at.IsZero(), "%s: work due at %v was announced as due now (the zero time): a worker that hears it claims nothing and forgets the later time, which it then finds only at its next poll", what, due)
	}
	assert.False(t, h.at.After(due), "%s: announced for %v, after its due time %v: a worker that heard it starts late", what, h.at, due)
	assert.Contains(t, h.claimed, id, "%s: a claim made on hearing the announcement (at %v, or at the due time %v for one of the zero time) did not find the work: it was announced before its write was visible (before the commit), or for a time before it is due", what, h.at, due)
}

// recordRetryAlone records a retry with RecordRetry, then, unless the
// store is a LedgerQueue (whose RecordRetry ended the lease: the worker
// makes no queue transition after it), RetryAt. The armed listener may
// claim the retry at its announced time before RetryAt runs; RetryAt then
// finds its lease superseded, which is what it must answer.
func recordRetryAlone(t *testing.T, h Harness, c hookrelay.Claim, now, at time.Time) {
	t.Helper()
	if !isLedgerQueue(h) {
		err := retry(t, h, c, now, at)
		if !errors.Is(err, hookrelay.ErrLeaseLost) {
			require.NoError(t, err)
		}
		return
	}
	a := attemptFor(c, hookrelay.KindRetryable, now)
	a.NextAttemptAt = at
	require.NoError(t, h.Ledger.RecordRetry(context.Background(), hookrelay.RecordRetryParams{
		ID: c.Delivery.ID, Lease: c.Lease, Attempt: a, NextAttempt: c.Delivery.Attempt + 1, NextAttemptAt: at, Now: now,
	}))
}

// dueHarness returns a fresh harness whose Queue has the DueNotifier
// ability, or skips.
// claimedToRetry is a listened-to store holding one delivery of event,
// announced and claimed, for a case to record its retry.
func claimedToRetry(t *testing.T, newHarness NewHarness, event string) (Harness, *dueListener, hookrelay.Delivery, hookrelay.Claim) {
	t.Helper()
	h, n := dueHarness(t, newHarness)
	l := listening(t, h, n)
	d := newDelivery(event, "dest_1", base)
	seed(t, h, d)
	l.next("a delivery created")
	c := claim(t, h.Queue, base, 1)
	require.Len(t, c, 1)
	return h, l, d, c[0]
}

func dueHarness(t *testing.T, newHarness NewHarness) (Harness, hookrelay.DueNotifier) {
	h := newHarness(t)
	n, ok := hookrelay.As[hookrelay.DueNotifier](h.Queue)
	if !ok {
		t.Skipf("the harness's Queue (%T) has no hookrelay.DueNotifier ability", h.Queue)
	}
	if h.NoDueAnnouncements != "" {
		t.Skipf("the harness's DueNotifier makes no announcements: %s", h.NoDueAnnouncements)
	}
	return h, n
}

// RunDueNotifier checks the optional hookrelay.DueNotifier ability: a
// listener hears, once it listens, of work due now; then of every
// delivery created, retry recorded (through RecordBatch when the Ledger is
// a BatchLedger, as the worker records them, and through RecordRetry and
// RetryAt, as Client.Process does), delivery redriven, destination resumed
// and release with ReleaseParams.Announce (what a stopping worker hands
// back), each announced for
// its due time (never "now" for work due later, never later than it is
// due) and only once a Claim finds it; every listener hears each
// announcement; ListenDue returns nil when its context ends, calls due no
// more after that, and listens again when started again (as the worker
// does after a lost connection). Each case listens through ListenDue and
// writes through the harness's ports, as workers and producers in other
// processes would. It skips when the Queue lacks the ability, or when
// Harness.NoDueAnnouncements says its ListenDue never announces.
//
// The memory store has no DueNotifier, on purpose. Its records live in
// one process, where a Client already wakes its own worker on what it
// enqueues, redrives or resumes; only several Clients sharing one memory
// store would gain (each finds the others' work at its next poll). For
// that, every worker on a memory store — the mock-clock engine scenarios
// of this suite and of users' own tests among them — would run a listener
// goroutine and be woken by every write, which changes the claim timing
// those tests pin down; and a memory store's Destinations are a separate
// value, so it could not announce a resume. The meta-test of these cases
// (catches_due_test.go) uses a memory store that announces as its control.
//
// Waits for an announcement that must come are bounded by
// Harness.DueAnnouncedWithin (20 s by default: a hang guard); the case
// where one must not come waits 500 ms and passes if none came by then.
func RunDueNotifier(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()
	later := func() time.Time { return time.Now().Add(24 * time.Hour).Truncate(time.Millisecond) }

	t.Run("AnnouncesOnceListening", func(t *testing.T) {
		h, n := dueHarness(t, newHarness)
		listening(t, h, n)
	})

	t.Run("CreatedWorkIsAnnouncedOnceClaimable", func(t *testing.T) {
		h, n := dueHarness(t, newHarness)
		l := listening(t, h, n)
		d := newDelivery("evt_due_now", "dest_1", base)
		l.arm(base)
		seed(t, h, d)
		assertAnnounced(t, l, d.ID, base, false, "a delivery created")
	})

	t.Run("WorkDueLaterIsAnnouncedWithItsDueTime", func(t *testing.T) {
		h, n := dueHarness(t, newHarness)
		l := listening(t, h, n)
		at := later()
		d := newDelivery("evt_due_later", "dest_1", at)
		l.arm(at)
		seed(t, h, d)
		assertAnnounced(t, l, d.ID, at, true, "a delivery created due later")
	})

	t.Run("RetryIsAnnouncedWithItsDueTime", func(t *testing.T) {
		h, l, d, c := claimedToRetry(t, newHarness, "evt_retry")
		at := later()
		a := attemptFor(c, hookrelay.KindRetryable, base)
		a.NextAttemptAt = at
		p := hookrelay.RecordRetryParams{ID: d.ID, Lease: c.Lease, Attempt: a, NextAttempt: 2, NextAttemptAt: at, Now: base}
		l.arm(at)
		if b, ok := h.Ledger.(hookrelay.BatchLedger); ok {
			errs, err := b.RecordBatch(ctx, []hookrelay.LedgerWrite{{Retry: &p}})
			require.NoError(t, err)
			require.Len(t, errs, 1)
			require.NoError(t, errs[0])
		} else {
			recordRetryAlone(t, h, c, base, at)
		}
		assertAnnounced(t, l, d.ID, at, true, "a retry recorded")
	})

	t.Run("RetryRecordedOneAtATimeIsAnnounced", func(t *testing.T) {
		// Client.Process records a retry with RecordRetry (then RetryAt),
		// not in a batch: a retry it records is announced all the same.
		h, l, d, c := claimedToRetry(t, newHarness, "evt_retry_alone")
		at := later()
		l.arm(at)
		recordRetryAlone(t, h, c, base, at)
		assertAnnounced(t, l, d.ID, at, true, "a retry recorded with RecordRetry")
	})

	t.Run("RedriveIsAnnounced", func(t *testing.T) {
		h, n := dueHarness(t, newHarness)
		dl, ok := hookrelay.As[hookrelay.DeadLetterLedger](h.Ledger)
		if !ok {
			t.Skipf("the harness's Ledger (%T) has no hookrelay.DeadLetterLedger ability", h.Ledger)
		}
		l := listening(t, h, n)
		d := newDelivery("evt_redrive", "dest_1", base)
		seed(t, h, d)
		l.next("a delivery created")
		c := claim(t, h.Queue, base, 1)
		require.Len(t, c, 1)
		require.NoError(t, kill(t, h, c[0], hookrelay.ReasonBadRequest, base))
		now := base.Add(time.Minute)
		l.arm(now)
		rec, moved, err := dl.RedriveDelivery(ctx, hookrelay.RedriveDeliveryParams{ID: d.ID, AuditID: "rdv_due", Now: now})
		require.NoError(t, err)
		require.True(t, moved)
		assertAnnounced(t, l, d.ID, rec.NextAttemptAt, false, "a delivery redriven")
	})

	t.Run("ResumedDestinationIsAnnounced", func(t *testing.T) {
		h, n := dueHarness(t, newHarness)
		if dn, ok := hookrelay.As[hookrelay.DueNotifier](h.Destinations); !ok || any(dn) != any(n) {
			t.Skipf("the harness's Destinations (%T) are not the Queue's store: a resume there is not the notifier's to announce", h.Destinations)
		}
		require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_paused", TenantID: "tenant_a", URL: "https://receiver.example/hook"}))
		require.NoError(t, h.Destinations.SetPaused(ctx, "dest_paused", true))
		l := listening(t, h, n)
		d := newDelivery("evt_paused", "dest_paused", base)
		seed(t, h, d)
		l.next("a delivery created")
		l.arm(base)
		require.NoError(t, h.Destinations.SetPaused(ctx, "dest_paused", false))
		assertAnnounced(t, l, d.ID, base, false, "a destination resumed")
	})

	t.Run("ReleaseAtStopIsAnnounced", func(t *testing.T) {
		// A worker that stops hands back the claims it holds with
		// Announce: nothing in its process will take them, and workers
		// in others should at once rather than at their next poll.
		h, l, d, c := claimedToRetry(t, newHarness, "evt_release_at_stop")
		now := base.Add(time.Minute)
		l.arm(now)
		require.NoError(t, h.Queue.Release(ctx, hookrelay.ReleaseParams{ID: d.ID, Lease: c.Lease, At: now, Now: now, Announce: true}))
		assertAnnounced(t, l, d.ID, now, false, "a release with Announce")
	})

	t.Run("EveryListenerHearsEachAnnouncement", func(t *testing.T) {
		h, n := dueHarness(t, newHarness)
		first := listening(t, h, n)
		second := listening(t, h, n)
		d := newDelivery("evt_both", "dest_1", base)
		seed(t, h, d)
		for _, l := range []*dueListener{first, second} {
			got := l.next("every listener (every worker, in every process) hears a delivery created")
			assert.False(t, got.at.After(base), "announced for %v, after its due time %v", got.at, base)
		}
	})

	t.Run("ReturnsNilAndCallsDueNoMoreOnceItsContextEnds", func(t *testing.T) {
		h, n := dueHarness(t, newHarness)
		l := listening(t, h, n)
		require.NoError(t, l.stop(), "ListenDue returns nil when its context ends")
		// A listener that returned and is still called would wake a
		// worker that stopped, from a goroutine that outlived it.
		ended := listenDue(t, h, n) // keeps the store listening: a store may stop announcing with no one to hear
		ended.next("a listener started again announces once it is listening")
		seed(t, h, newDelivery("evt_after_stop", "dest_1", base))
		ended.next("a delivery created")
		// l's worker goroutine has stopped: a late call stays in l.raw.
		select {
		case at := <-l.raw:
			t.Errorf("the listener whose context ended was called with %v after ListenDue returned", at)
		case <-time.After(dueQuiet): // a bounded wait for a must-not; see dueQuiet
		}
	})

	t.Run("ListensAgainWhenStartedAgain", func(t *testing.T) {
		h, n := dueHarness(t, newHarness)
		for i := range 3 {
			// The worker starts ListenDue again after it returned (a lost
			// connection): each time, it announces once listening, for
			// what was announced in the gap, and hears what comes after.
			l := listening(t, h, n)
			d := newDelivery("evt_round_"+string(rune('a'+i)), "dest_1", base)
			l.arm(base)
			seed(t, h, d)
			assertAnnounced(t, l, d.ID, base, false, "a delivery created, heard by a listener started again")
			require.NoError(t, l.stop())
		}
	})
}
