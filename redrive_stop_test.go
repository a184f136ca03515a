package hookrelay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// firstMoveHeld is the memory store with its first RedriveDelivery held
// until release is closed: a redrive that falls behind its schedule.
type firstMoveHeld struct {
	*memory.Store
	once             sync.Once
	entered, release chan struct{}
}

func (f *firstMoveHeld) RedriveDelivery(ctx context.Context, p hookrelay.RedriveDeliveryParams) (hookrelay.Delivery, bool, error) {
	f.once.Do(func() {
		close(f.entered)
		<-f.release
	})
	return f.Store.RedriveDelivery(ctx, p)
}

// refusedClient is a client on queue and ledger whose one destination,
// "accounting" of tenant_a, refuses every delivery for good (401), so that
// deadPayments enqueues three payments to accounting and processes them
// once: refusedClient's recipient refuses them, so they are dead.
func deadPayments(t *testing.T, client *hookrelay.Client, store *memory.Store, clk clock.Clock) {
	t.Helper()
	ctx := context.Background()
	for i := range 3 {
		_, err := client.Enqueue(ctx, hookrelay.EnqueueParams{
			EventID: fmt.Sprintf("pay_%d", i), TenantID: "tenant_a", DestinationID: "accounting",
			EventType: "lease.payment_recorded", Payload: []byte(`{}`),
		})
		require.NoError(t, err)
	}
	claims, err := store.Claim(ctx, hookrelay.ClaimParams{Now: clk.Now(), Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, claims, 3)
	for _, c := range claims {
		require.NoError(t, client.Process(ctx, c))
	}
}

// each one processed is dead-lettered, ready for a redrive.
func refusedClient(t *testing.T, clk clock.Clock, queue hookrelay.Queue, ledger hookrelay.Ledger) *hookrelay.Client {
	t.Helper()
	dests := memory.NewDestinations(hookrelay.Destination{ID: "accounting", TenantID: "tenant_a", URL: "https://accounting.example/"})
	client, err := hookrelay.New(hookrelay.Config{
		Queue: queue, Ledger: ledger, Destinations: dests, Clock: clk,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
			return hookrelay.Permanent(hookrelay.ReasonAuthRejected).WithStatus(401)
		}),
	})
	require.NoError(t, err)
	return client
}

// A stop requested while a rate-limited redrive is behind its schedule (its
// next slot's time already passed when it gets there) is seen at that slot:
// the stop is looked for at every slot the rate put in the future, not only
// where the redrive actually had to sleep.
func TestRedriveStopIsSeenAtASlotAlreadyDue(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	store := memory.NewStore()
	ledger := &firstMoveHeld{Store: store, entered: make(chan struct{}), release: make(chan struct{})}
	client := refusedClient(t, clk, store, ledger)
	deadPayments(t, client, store, clk)

	ids, done := startRedrive(ctx, t, client, hookrelay.DeadLetterFilter{DestinationIDs: []string{"accounting"}}, 1)
	<-ledger.entered // the first move, due at once, is under way
	id := <-ids
	_, err := client.StopRedrive(ctx, id, "bob")
	require.NoError(t, err)
	clk.Add(time.Second) // the second slot's time passes while the first move is held
	close(ledger.release)

	var a hookrelay.RedriveAudit
	deadline := time.After(10 * time.Second)
	for a.ID == "" {
		select {
		case a = <-done:
		case <-deadline:
			t.Fatal("the redrive did not end")
		case <-time.After(time.Millisecond):
			clk.Add(time.Second) // a redrive that missed the stop sleeps for its next slot
		}
	}
	assert.Equal(t, hookrelay.RedriveStopped, a.State)
	assert.EqualValues(t, 1, a.Redriven, "only the move under way when the stop came")
	assert.Equal(t, "bob", a.StopRequestedBy)
}

// A redrive whose context ends as it starts (a console closing, a process
// shutting down) is stopped as interrupted, so it can be resumed — not
// failed because the store refused the first read of its audit entry.
func TestRedriveCancelledAsItStartsIsInterruptedNotFailed(t *testing.T) {
	clk := clock.NewMock()
	store := memory.NewStore()
	client := refusedClient(t, clk, store, store)
	bg := context.Background()
	_, err := client.Enqueue(bg, hookrelay.EnqueueParams{
		EventID: "pay_1", TenantID: "tenant_a", DestinationID: "accounting", EventType: "lease.payment_recorded", Payload: []byte(`{}`),
	})
	require.NoError(t, err)
	claims, err := store.Claim(bg, hookrelay.ClaimParams{Now: clk.Now(), Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.NoError(t, client.Process(bg, claims[0]))

	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	a, err := client.Redrive(ctx, hookrelay.RedriveParams{
		Filter: hookrelay.DeadLetterFilter{DestinationIDs: []string{"accounting"}},
		Actor:  "alice", Reason: "credentials fixed", RatePerSecond: 1,
		Progress: func(hookrelay.RedriveAudit) { cancel() }, // the entry exists; the run has not begun
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, hookrelay.RedriveStopped, a.State)
	assert.Contains(t, a.Error, "interrupted")
	a, err = client.ResumeRedrive(bg, a.ID, "oncall", nil)
	require.NoError(t, err)
	assert.Equal(t, hookrelay.RedriveFinished, a.State, "an interrupted redrive resumes")
	assert.EqualValues(t, 1, a.Redriven)
}

// enqueueCancels is the memory store as a queue whose Enqueue, once armed,
// fails because the caller's context ended while it published: a Ctrl-C
// (or a console's Close) landing between the ledger move and the publish
// to a broker.
type enqueueCancels struct {
	*memory.Store
	cancel context.CancelFunc // set to arm it
}

func (q *enqueueCancels) Enqueue(ctx context.Context, ds []hookrelay.Delivery) error {
	if q.cancel == nil {
		return q.Store.Enqueue(ctx, ds)
	}
	q.cancel()
	return fmt.Errorf("publish: %w", ctx.Err())
}

// A delivery the ledger moved but the queue did not take is named by the
// audit entry, which ends failed, also when the context ended meanwhile: a
// resume skips it (it is no longer dead), so the audit is the only place
// that says it needs enqueueing again.
func TestRedriveNamesTheDeliveryItsInterruptedEnqueueLeftBehind(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	store := memory.NewStore()
	queue := &enqueueCancels{Store: store}
	client := refusedClient(t, clk, queue, store)
	res, err := client.Enqueue(ctx, hookrelay.EnqueueParams{
		EventID: "pay_1", TenantID: "tenant_a", DestinationID: "accounting", EventType: "lease.payment_recorded", Payload: []byte(`{}`),
	})
	require.NoError(t, err)
	claims, err := store.Claim(ctx, hookrelay.ClaimParams{Now: clk.Now(), Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, claims, 1)
	require.NoError(t, client.Process(ctx, claims[0]))

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queue.cancel = cancel
	a, err := client.Redrive(rctx, hookrelay.RedriveParams{
		Filter: hookrelay.DeadLetterFilter{DestinationIDs: []string{"accounting"}},
		Actor:  "alice", Reason: "credentials fixed", RatePerSecond: 1,
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), res.ID, "the error names the delivery left out of the queue")
	assert.Equal(t, hookrelay.RedriveFailed, a.State)
	assert.Contains(t, a.Error, res.ID, "the audit entry names it")
	assert.Contains(t, a.Error, "queue.enqueue")
	d, err := store.Get(ctx, res.ID)
	require.NoError(t, err)
	assert.Equal(t, hookrelay.StatePending, d.State, "the ledger moved it")
}

// removedBeforeFirstMove is the memory store with a cleaner allowed to
// remove dead letters (RemoveDead) that takes the oldest one just before
// the redrive's first move: a pass of a worker's cleaner between the
// redrive's listing and its moves.
type removedBeforeFirstMove struct {
	*memory.Store
	once sync.Once
	now  time.Time
}

func (r *removedBeforeFirstMove) RedriveDelivery(ctx context.Context, p hookrelay.RedriveDeliveryParams) (hookrelay.Delivery, bool, error) {
	var err error
	r.once.Do(func() {
		_, err = r.Store.CleanHistory(ctx, hookrelay.CleanHistoryParams{
			Now: r.now, Policy: hookrelay.RetentionPolicy{Delivered: time.Hour, RemoveDead: true}, Limit: 1,
		})
	})
	if err != nil {
		return hookrelay.Delivery{}, false, err
	}
	return r.Store.RedriveDelivery(ctx, p)
}

// A dead letter a cleaner removes while a redrive runs is skipped, as one
// no longer dead is: the redrive moves the rest and finishes.
func TestRedriveSkipsADeadLetterRemovedMeanwhile(t *testing.T) {
	ctx := context.Background()
	clk := clock.New() // the redrive's rate waits a few real milliseconds
	store := memory.NewStore()
	ledger := &removedBeforeFirstMove{Store: store, now: clk.Now().Add(time.Hour)}
	client := refusedClient(t, clk, store, ledger)
	deadPayments(t, client, store, clk)

	a, err := client.Redrive(ctx, hookrelay.RedriveParams{
		Filter: hookrelay.DeadLetterFilter{DestinationIDs: []string{"accounting"}},
		Actor:  "alice", Reason: "credentials fixed", RatePerSecond: 1000,
	})
	require.NoError(t, err)
	assert.Equal(t, hookrelay.RedriveFinished, a.State)
	assert.EqualValues(t, 2, a.Redriven, "the two still there")
	assert.EqualValues(t, 1, a.Skipped, "the one removed meanwhile")
}

// cancelAfterMove is the memory store, as the Ledger of a client whose
// Queue is the same store, that cancels the redrive's context right after
// the ledger moved a dead letter: Close or a deploy ending the redrive
// between the move and what follows it.
type cancelAfterMove struct {
	*memory.Store
	cancel context.CancelFunc
}

func (c *cancelAfterMove) Unwrap() hookrelay.Ledger { return c.Store }

func (c *cancelAfterMove) RedriveDelivery(ctx context.Context, p hookrelay.RedriveDeliveryParams) (hookrelay.Delivery, bool, error) {
	d, ok, err := c.Store.RedriveDelivery(ctx, p)
	c.cancel()
	return d, ok, err
}

// Where the queue is the ledger's own store, the ledger's move is what
// makes a redriven delivery claimable: nothing is left to hand to the
// queue, so a redrive ended right after a move is interrupted (stopped,
// resumable), not failed naming a delivery that is in fact pending. (It
// was handed to the queue again, which refused it for the ended context.)
func TestRedriveEndedAfterAMoveOnALedgerQueueIsInterrupted(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	store := memory.NewStore()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	client := refusedClient(t, clk, store, &cancelAfterMove{Store: store, cancel: cancel})
	var ids []string
	for _, ev := range []string{"pay_1", "pay_2"} {
		res, err := client.Enqueue(ctx, hookrelay.EnqueueParams{
			EventID: ev, TenantID: "tenant_a", DestinationID: "accounting", EventType: "lease.payment_recorded", Payload: []byte(`{}`),
		})
		require.NoError(t, err)
		ids = append(ids, res.ID)
	}
	claims, err := store.Claim(ctx, hookrelay.ClaimParams{Now: clk.Now(), Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Len(t, claims, 2)
	for _, cl := range claims {
		require.NoError(t, client.Process(ctx, cl))
	}

	a, err := client.Redrive(rctx, hookrelay.RedriveParams{
		Filter: hookrelay.DeadLetterFilter{DestinationIDs: []string{"accounting"}},
		Actor:  "alice", Reason: "credentials fixed", RatePerSecond: 1,
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, hookrelay.RedriveStopped, a.State, "interrupted, resumable: %s", a.Error)
	assert.Contains(t, a.Error, "interrupted")
	assert.EqualValues(t, 1, a.Redriven, "the one move is counted")
	pending := 0
	for _, id := range ids {
		d, err := store.Get(ctx, id)
		require.NoError(t, err)
		if d.State == hookrelay.StatePending {
			pending++
		}
	}
	assert.Equal(t, 1, pending, "the moved delivery is claimable, the other still dead")
}

// A stop asked of a redrive at a low rate (one delivery per 1000 s) takes
// effect within seconds, not at its next slot a quarter of an hour away:
// the wait for a far slot looks at the stop control as it goes.
func TestRedriveStopIsSeenWhileWaitingForAFarSlot(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	store := memory.NewStore()
	client := refusedClient(t, clk, store, store)
	deadPayments(t, client, store, clk)

	ids, done := startRedrive(ctx, t, client, hookrelay.DeadLetterFilter{DestinationIDs: []string{"accounting"}}, 0.001)
	id := <-ids
	require.Eventually(t, func() bool {
		page, err := client.DeadLetters(ctx, hookrelay.DeadLettersParams{})
		return err == nil && len(page.Deliveries) == 2
	}, 10*time.Second, time.Millisecond, "the first move, due at once")
	stoppedAt := clk.Now()
	_, err := client.StopRedrive(ctx, id, "bob")
	require.NoError(t, err)

	var a hookrelay.RedriveAudit
	for range 100 { // at most 10 s on the redrive's clock
		select {
		case a = <-done:
		case <-time.After(20 * time.Millisecond):
			clk.Add(100 * time.Millisecond)
			continue
		}
		break
	}
	if a.ID == "" {
		t.Error("the redrive did not end within 10 s of the stop on its clock")
		// Let the redrive end, so that it does not outlive the test.
		for range 1000 {
			clk.Add(10 * time.Second)
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
		return
	}
	assert.Equal(t, hookrelay.RedriveStopped, a.State)
	assert.EqualValues(t, 1, a.Redriven)
	assert.Equal(t, "bob", a.StopRequestedBy)
	assert.Less(t, clk.Now().Sub(stoppedAt), 10*time.Second)
}

// A resumed redrive keeps its rate across the stop: the first delivery it
// moves to a destination waits for that destination's next slot after the
// stopped run's last move, instead of going at once (a stop and a resume
// would otherwise let one more delivery per destination through each time).
func TestResumedRedriveKeepsItsRateAcrossTheStop(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	store := memory.NewStore()
	var mu sync.Mutex
	var moved []time.Time
	dests := memory.NewDestinations(hookrelay.Destination{ID: "accounting", TenantID: "tenant_a", URL: "https://accounting.example/"})
	client, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: dests, Clock: clk,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result {
			return hookrelay.Permanent(hookrelay.ReasonAuthRejected).WithStatus(401)
		}),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventRedriven {
				mu.Lock()
				moved = append(moved, e.Time)
				mu.Unlock()
			}
		}),
	})
	require.NoError(t, err)
	deadPayments(t, client, store, clk)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(moved) }

	ids, done := startRedrive(ctx, t, client, hookrelay.DeadLetterFilter{}, 0.1) // ten seconds apart
	id := <-ids
	require.Eventually(t, func() bool { return count() == 1 }, 10*time.Second, time.Millisecond)
	_, err = client.StopRedrive(ctx, id, "bob")
	require.NoError(t, err)
	var a hookrelay.RedriveAudit
	require.Eventually(t, func() bool {
		select {
		case a = <-done:
			return true
		default:
			clk.Add(100 * time.Millisecond)
			return false
		}
	}, 10*time.Second, time.Millisecond)
	require.Equal(t, hookrelay.RedriveStopped, a.State)
	require.Equal(t, 1, count())

	resumed := make(chan hookrelay.RedriveAudit, 1)
	go func() {
		a, err := client.ResumeRedrive(ctx, id, "bob", nil)
		assert.NoError(t, err)
		resumed <- a
	}()
	require.Eventually(t, func() bool {
		select {
		case a = <-resumed:
			return true
		default:
			clk.Add(100 * time.Millisecond)
			return false
		}
	}, 20*time.Second, time.Millisecond)
	assert.Equal(t, hookrelay.RedriveFinished, a.State)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, moved, 3)
	for i := 1; i < len(moved); i++ {
		assert.GreaterOrEqual(t, moved[i].Sub(moved[i-1]), 10*time.Second, "move %d came %v after the one before", i, moved[i].Sub(moved[i-1]))
	}
}

// startRedrive starts alice's redrive of filter at rate on client in a
// goroutine: ids gets its audit ID at its first progress report, done its
// final audit.
func startRedrive(ctx context.Context, t *testing.T, client *hookrelay.Client, filter hookrelay.DeadLetterFilter, rate float64) (<-chan string, <-chan hookrelay.RedriveAudit) {
	ids := make(chan string, 1)
	done := make(chan hookrelay.RedriveAudit, 1)
	go func() {
		a, err := client.Redrive(ctx, hookrelay.RedriveParams{
			Filter: filter, Actor: "alice", Reason: "credentials fixed", RatePerSecond: rate,
			Progress: func(a hookrelay.RedriveAudit) {
				select {
				case ids <- a.ID:
				default:
				}
			},
		})
		assert.NoError(t, err)
		done <- a
	}()
	return ids, done
}

// progressLost is the memory store failing every redrive audit update
// that carries progress only (no state): the batch's update after its
// moves, lost as it would be to a process dying after the moves.
type progressLost struct{ *memory.Store }

func (p *progressLost) UpdateRedriveAudit(ctx context.Context, u hookrelay.RedriveAuditUpdate) (hookrelay.RedriveAudit, error) {
	if u.State == "" && u.StopRequestedBy == "" && !u.ClearStop {
		return hookrelay.RedriveAudit{}, errors.New("store unreachable")
	}
	return p.Store.UpdateRedriveAudit(ctx, u)
}

// A redrive whose batch moved deliveries, but whose progress update after
// the batch never reached the store (the process died, or the store
// failed), leaves an audit entry counting every delivery it moved: the
// count is made with each move, not after the batch.
func TestRedriveAuditCountsTheMovesOfABatchWhoseUpdateWasLost(t *testing.T) {
	ctx := context.Background()
	clk := clock.New() // the redrive's rate waits a few real milliseconds
	store := memory.NewStore()
	client := refusedClient(t, clk, store, &progressLost{Store: store})
	deadPayments(t, client, store, clk)

	a, err := client.Redrive(ctx, hookrelay.RedriveParams{
		Filter: hookrelay.DeadLetterFilter{DestinationIDs: []string{"accounting"}},
		Actor:  "alice", Reason: "credentials fixed", RatePerSecond: 1000,
	})
	// The redrive makes a progress-only update after a batch only for
	// deliveries gone before it reached them (none here), so err may be
	// nil; the counts below are what matters.
	_ = err
	require.NotEmpty(t, a.ID)
	page, err := store.ListDead(ctx, hookrelay.ListDeadParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, page.Deliveries, "the batch moved all three")
	got, err := client.RedriveStatus(ctx, a.ID)
	require.NoError(t, err)
	assert.EqualValues(t, 3, got.Redriven, "every delivery moved is counted")
	assert.EqualValues(t, 0, got.Skipped)
	assert.NotEmpty(t, got.LastDeliveryID)
}
