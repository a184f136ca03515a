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

// The worker's cleaner removes delivered history once it is past the
// retention, in bounded batches, and reports each batch to the observer;
// pending and dead records stay.
func TestWorkerCleanerRemovesDeliveredHistory(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewMock()
	store := memory.NewStore()
	dests := memory.NewDestinations(
		hookrelay.Destination{ID: "ok", URL: "https://ok.example/"},
		hookrelay.Destination{ID: "gone", URL: "https://gone.example/"},
	)
	var (
		mu           sync.Mutex
		delivered    int
		removed      = map[string]int64{}
		batches      int
		firstRemoval time.Time
	)
	allDelivered, allRemoved := make(chan struct{}), make(chan struct{})
	c, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: dests, Clock: clk,
		PollInterval: 24 * time.Hour, // enqueues wake the worker; the test's clock steps need no poll
		Retention:    &hookrelay.RetentionPolicy{Delivered: time.Hour, Interval: time.Minute, BatchSize: 2},
		Sender: hookrelay.SenderFunc(func(_ context.Context, p hookrelay.SendParams) hookrelay.Result {
			if p.Destination.ID == "gone" {
				return hookrelay.Permanent(hookrelay.ReasonBadRequest).WithStatus(400)
			}
			return hookrelay.Delivered(204)
		}),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch e.Name {
			case hookrelay.EventDelivered, hookrelay.EventDeadLettered:
				if delivered++; delivered == 6 {
					close(allDelivered)
				}
			case hookrelay.EventHistoryRemoved:
				if batches++; batches == 1 {
					firstRemoval = e.Time
				}
				removed[fmt.Sprintf("%s/%s", e.Delivery.DestinationID, e.Delivery.State)] += e.Count
				if removed["ok/delivered"] == 5 {
					close(allRemoved)
				}
			}
		}),
	})
	require.NoError(t, err)
	var ids []string
	for i := range 5 {
		res, err := c.Enqueue(ctx, hookrelay.EnqueueParams{EventID: fmt.Sprintf("evt_%d", i), TenantID: "t", DestinationID: "ok", EventType: "x", Payload: []byte(`{}`)})
		require.NoError(t, err)
		ids = append(ids, res.ID)
	}
	dead, err := c.Enqueue(ctx, hookrelay.EnqueueParams{EventID: "evt_dead", TenantID: "t", DestinationID: "gone", EventType: "x", Payload: []byte(`{}`)})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	waitClosed(t, allDelivered, "deliveries")
	// The mock clock moves a minute at a time, with real time between the
	// steps for the cleaner to run its pass.
	deliveredAt := clk.Now()
	stepUntilClosed(t, clk, allRemoved, "removals")
	mu.Lock()
	assert.Equal(t, map[string]int64{"ok/delivered": 5}, removed, "only delivered history, counted per destination and state")
	assert.GreaterOrEqual(t, batches, 3, "batches of at most two")
	assert.False(t, firstRemoval.Before(deliveredAt.Add(time.Hour)), "nothing removed within the retention: first removal at +%s", firstRemoval.Sub(deliveredAt))
	mu.Unlock()
	for _, id := range ids {
		_, err := store.Get(ctx, id)
		assert.ErrorIs(t, err, hookrelay.ErrNotFound, "removed")
	}
	_, err = store.Get(ctx, dead.ID)
	assert.NoError(t, err, "a dead letter is kept")
}

// stepUntilClosed moves the mock clock a minute at a time, with real time
// between the steps for the worker to act, until ch is closed. It stops on
// ch, not after a number of steps: a worker starved of CPU on a busy
// machine sees more clock go by, which the callers' assertions (lower
// bounds) allow, instead of the clock stopping before its next pass.
func stepUntilClosed(t *testing.T, clk *clock.Mock, ch <-chan struct{}, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second) // a hang, not a speed check
	for {
		select {
		case <-ch:
			return
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		default:
			clk.Add(time.Minute)
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second): // a hang, not a speed check
		t.Fatalf("timed out waiting for %s", what)
	}
}

// ledgerOnly hides every ability of the ledger it holds.
type ledgerOnly struct{ hookrelay.Ledger }

func TestNewRefusesARetentionItCannotApply(t *testing.T) {
	store := memory.NewStore()
	dests := memory.NewDestinations()
	for _, tc := range []struct {
		name   string
		ledger hookrelay.Ledger
		policy hookrelay.RetentionPolicy
		field  string
	}{
		{"negative", store, hookrelay.RetentionPolicy{Delivered: -time.Hour}, "Retention.Delivered"},
		{"dead age without RemoveDead", store, hookrelay.RetentionPolicy{Dead: time.Hour}, "Retention.Dead"},
		{"ledger without the ability", ledgerOnly{store}, hookrelay.DefaultRetention(), "Retention"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := hookrelay.New(hookrelay.Config{Queue: store, Ledger: tc.ledger, Destinations: dests, Retention: &tc.policy})
			var ve *hookrelay.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, tc.field, ve.Field)
			assert.ErrorIs(t, err, hookrelay.ErrInvalidConfig)
		})
	}
}

func TestMaxRetrySpan(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    hookrelay.Policy
		want time.Duration
	}{
		{"default: six gaps of at most 15 minutes", hookrelay.DefaultPolicy(), 90 * time.Minute},
		{"one attempt never retries", hookrelay.Policy{MaxAttempts: 1, MaxDelay: time.Hour}, 0},
		{"the delivery window bounds it", hookrelay.Policy{MaxAttempts: 20, BaseDelay: time.Second, MaxDelay: time.Hour, MaxAge: 6 * time.Hour}, 6 * time.Hour},
		{"a window longer than the schedule does not", hookrelay.Policy{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: time.Hour, MaxAge: 24 * time.Hour}, 2 * time.Hour},
		{"no overflow", hookrelay.Policy{MaxAttempts: 1 << 40, BaseDelay: time.Second, MaxDelay: 1 << 40}, 1<<63 - 1},
	} {
		assert.Equal(t, tc.want, tc.p.MaxRetrySpan(), tc.name)
	}
}

// failingCleaner is a memory store whose first cleaner batch fails.
type failingCleaner struct {
	*memory.Store
	mu    sync.Mutex
	calls int
}

func (f *failingCleaner) CleanHistory(ctx context.Context, p hookrelay.CleanHistoryParams) (hookrelay.CleanHistoryResult, error) {
	f.mu.Lock()
	f.calls++
	first := f.calls == 1
	f.mu.Unlock()
	if first {
		return hookrelay.CleanHistoryResult{}, errors.New("database unreachable")
	}
	return f.Store.CleanHistory(ctx, p)
}

// A cleaner pass that fails is reported as a worker error naming the
// operation, and the next pass does the work.
func TestWorkerCleanerReportsAFailedPassAndTriesAgain(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewMock()
	store := &failingCleaner{Store: memory.NewStore()}
	var mu sync.Mutex
	var ops []string
	removed := make(chan struct{})
	c, res := startedCleaner(ctx, t, store, clk, func(e hookrelay.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Name {
		case hookrelay.EventWorkerError:
			var oe *hookrelay.OpError
			if errors.As(e.Err, &oe) {
				ops = append(ops, oe.Op)
			}
		case hookrelay.EventHistoryRemoved:
			close(removed)
		}
	})
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	require.Eventually(t, func() bool { ok, _ := store.WasDelivered(ctx, res.ID); return ok }, 5*time.Second, time.Millisecond)
	stepUntilClosed(t, clk, removed, "the pass after the failure")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"ledger.clean_history"}, ops, "the failed pass is reported once, with its operation")
}

// compactedWhileRead is a memory store whose cleaner compacts a record's
// attempts just after Attempts read them: a pass of another worker that
// lands between Client.Delivery's reads.
type compactedWhileRead struct {
	*memory.Store
	now time.Time
}

func (s *compactedWhileRead) Attempts(ctx context.Context, id string) ([]hookrelay.Attempt, error) {
	as, err := s.Store.Attempts(ctx, id)
	if err == nil {
		_, err = s.Store.CleanHistory(ctx, hookrelay.CleanHistoryParams{
			Now: s.now, Policy: hookrelay.RetentionPolicy{Delivered: 365 * 24 * time.Hour}, Limit: 100,
		})
	}
	return as, err
}

// A delivery compacted while Client.Delivery reads it shows its attempts
// once: the summary, not the summary and the attempts it replaced.
func TestDeliveryCompactedWhileReadShowsItsAttemptsOnce(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewMock()
	store := &compactedWhileRead{Store: memory.NewStore(), now: clk.Now().Add(time.Hour)}
	delivered := make(chan struct{})
	c, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: memory.NewDestinations(hookrelay.Destination{ID: "ok", URL: "https://ok.example/"}),
		Clock: clk, PollInterval: 24 * time.Hour,
		Sender: hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
		Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
			if e.Name == hookrelay.EventDelivered {
				close(delivered)
			}
		}),
	})
	require.NoError(t, err)
	res, err := c.Enqueue(ctx, hookrelay.EnqueueParams{EventID: "evt_1", TenantID: "t", DestinationID: "ok", EventType: "x", Payload: []byte(`{}`)})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	waitClosed(t, delivered, "the delivery")
	require.NoError(t, c.Stop(ctx))

	det, err := c.Delivery(ctx, res.ID)
	require.NoError(t, err)
	require.NotNil(t, det.Compacted, "compacted by the time the summary was read")
	assert.Equal(t, 1, det.Compacted.Count)
	assert.Empty(t, det.Attempts, "the compacted attempt is not also shown in full")
}

// endlessBacklog is a memory ledger whose cleaner always fills its batch:
// the first pass over years of history, which takes minutes.
type endlessBacklog struct {
	*memory.Store
	taken     chan struct{}
	takenOnce sync.Once
}

func (s *endlessBacklog) CleanHistory(context.Context, hookrelay.CleanHistoryParams) (hookrelay.CleanHistoryResult, error) {
	time.Sleep(time.Millisecond) // a batch takes time
	return hookrelay.CleanHistoryResult{More: true}, nil
}

func (s *endlessBacklog) TakeUnpublished(ctx context.Context, p hookrelay.RecoverUnpublishedParams) ([]hookrelay.Delivery, error) {
	s.takenOnce.Do(func() { close(s.taken) })
	return s.Store.TakeUnpublished(ctx, p)
}

// A long cleaner pass does not hold up the recovery of unpublished
// deliveries: both run on the housekeeping goroutine, and a pass runs
// batches until one is not full, so a pass over a large backlog kept the
// recovery waiting for its whole length (a lost publish waited minutes
// past its grace period).
func TestALongCleanerPassLetsTheRecoveryRun(t *testing.T) {
	ctx := context.Background()
	ledger := &endlessBacklog{Store: memory.NewStore(), taken: make(chan struct{})}
	c, err := hookrelay.New(hookrelay.Config{
		Queue: memory.NewStore(), Ledger: ledger, // a queue apart from the ledger, as a broker is
		Destinations: memory.NewDestinations(hookrelay.Destination{ID: "ok", URL: "https://ok.example/"}),
		Clock:        clock.NewMock(), PollInterval: time.Minute,
		Retention: &hookrelay.RetentionPolicy{Delivered: time.Hour},
		Sender:    hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
	})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	select {
	case <-ledger.taken:
	case <-time.After(3 * time.Second): // a thousand batches
		t.Fatal("the recovery did not run while the cleaner's pass went on")
	}
}

// halfFailingCleaner is a memory store whose cleaner call removes, then
// fails: a SQL cleaner whose compaction failed after its removal committed.
type halfFailingCleaner struct{ *memory.Store }

func (f *halfFailingCleaner) CleanHistory(ctx context.Context, p hookrelay.CleanHistoryParams) (hookrelay.CleanHistoryResult, error) {
	res, err := f.Store.CleanHistory(ctx, p)
	if err == nil && len(res.Counts) > 0 {
		err = errors.New("compaction failed")
	}
	return res, err
}

// What a failed cleaner call did before it failed is reported: those
// records are gone, and no later pass counts them.
func TestWorkerCleanerReportsWhatAFailedCallRemoved(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewMock()
	store := &halfFailingCleaner{Store: memory.NewStore()}
	var mu sync.Mutex
	var removed int64
	failed := make(chan struct{})
	var failedOnce sync.Once
	c, res := startedCleaner(ctx, t, store, clk, func(e hookrelay.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Name {
		case hookrelay.EventWorkerError:
			failedOnce.Do(func() { close(failed) })
		case hookrelay.EventHistoryRemoved:
			removed += e.Count
		}
	})
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	stepUntilClosed(t, clk, failed, "the failed call") // the first call that removes something fails
	_, err := store.Get(ctx, res.ID)
	require.ErrorIs(t, err, hookrelay.ErrNotFound, "the failed call removed it")
	mu.Lock()
	defer mu.Unlock()
	assert.EqualValues(t, 1, removed, "and its removal is reported")
}

// startedCleaner starts a client on store with a cleaner pass every minute
// of clk and a sender that delivers, after enqueueing one delivery (res) to
// destination "ok"; observe sees every event.
func startedCleaner(ctx context.Context, t *testing.T, store interface {
	hookrelay.Queue
	hookrelay.Ledger
}, clk *clock.Mock, observe func(hookrelay.Event)) (*hookrelay.Client, hookrelay.EnqueueResult) {
	t.Helper()
	c, err := hookrelay.New(hookrelay.Config{
		Queue: store, Ledger: store, Destinations: memory.NewDestinations(hookrelay.Destination{ID: "ok", URL: "https://ok.example/"}),
		Clock: clk, PollInterval: 24 * time.Hour,
		Retention: &hookrelay.RetentionPolicy{Interval: time.Minute},
		Sender:    hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
		Observer:  hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) { observe(e) }),
	})
	require.NoError(t, err)
	res, err := c.Enqueue(ctx, hookrelay.EnqueueParams{EventID: "evt_1", TenantID: "t", DestinationID: "ok", EventType: "x", Payload: []byte(`{}`)})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	return c, res
}
