package hookrelay_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// announcer is a Queue with the DueNotifier ability whose announcements
// the test makes: announce calls the running listener's due. Each
// ListenDue call is counted; fail, when set, ends the listener with an
// error after it ran for the duration fail returns.
type announcer struct {
	hookrelay.Queue
	mu     sync.Mutex
	due    func(time.Time)
	starts atomic.Int64
	fail   func(start int64) (after time.Duration, ok bool)
}

func (a *announcer) ListenDue(ctx context.Context, due func(time.Time)) error {
	n := a.starts.Add(1)
	a.mu.Lock()
	a.due = due
	a.mu.Unlock()
	if a.fail != nil {
		if after, ok := a.fail(n); ok {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(after):
				return errors.New("listener connection lost")
			}
		}
	}
	<-ctx.Done()
	return nil
}

func (a *announcer) announce(at time.Time) {
	a.mu.Lock()
	due := a.due
	a.mu.Unlock()
	due(at)
}

// An announcement of work due now does not make the worker forget a
// later due time it was told of: the delivery due in 10 s is made at its
// time, not at the next poll an hour later.
func TestAnnouncedDueTimeSurvivesAnAnnouncementOfWorkDueNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		queue := &announcer{Queue: store}
		var delivered atomic.Int64
		c, err := hookrelay.New(hookrelay.Config{
			Queue: queue, Ledger: store, PollInterval: time.Hour,
			Destinations: memory.NewDestinations(hookrelay.Destination{ID: "d", URL: "https://example.com/hook"}),
			Sender:       hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
			Observer: hookrelay.ObserverFunc(func(_ context.Context, e hookrelay.Event) {
				if e.Name == hookrelay.EventDelivered {
					delivered.Add(1)
				}
			}),
		})
		require.NoError(t, err)
		ctx := context.Background()
		require.NoError(t, c.Start(ctx))
		defer func() { require.NoError(t, c.Stop(ctx)) }()
		synctest.Wait() // the first, empty poll has passed; the listener runs

		ds, err := c.Prepare(ctx, []hookrelay.EnqueueParams{{EventID: "later", TenantID: "t", DestinationID: "d", EventType: "x", Payload: []byte("{}")}})
		require.NoError(t, err)
		later := time.Now().Add(10 * time.Second)
		ds[0].NextAttemptAt = later
		_, err = store.Create(ctx, ds)
		require.NoError(t, err)
		queue.announce(later)
		synctest.Wait()
		queue.announce(time.Time{}) // other work, due now (already taken by another worker)
		synctest.Wait()

		time.Sleep(11 * time.Second)
		synctest.Wait()
		assert.EqualValues(t, 1, delivered.Load(), "the delivery announced for 10 s from now waited for the hourly poll")
	})
}

// A listener that fails is started again after a backoff that grows while
// it keeps failing (no hot loop), but one that ran for an hour before its
// connection was lost is started again as quickly as the first failure
// was: the backoff of failures long past does not keep the worker deaf
// (polling only) for 30 s after every later loss.
func TestListenerRestartsQuicklyAfterARunThatLasted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.NewStore()
		var mu sync.Mutex
		var starts []time.Time
		queue := &announcer{Queue: store, fail: func(n int64) (time.Duration, bool) {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			switch {
			case n <= 10:
				return 0, true // the server refuses it ten times in a row
			case n == 11:
				return time.Hour, true // then it listens for an hour and is cut off
			}
			return 0, false
		}}
		c, err := hookrelay.New(hookrelay.Config{
			Queue: queue, Ledger: store, PollInterval: time.Hour,
			Destinations: memory.NewDestinations(),
			Sender:       hookrelay.SenderFunc(func(context.Context, hookrelay.SendParams) hookrelay.Result { return hookrelay.Delivered(204) }),
		})
		require.NoError(t, err)
		ctx := context.Background()
		require.NoError(t, c.Start(ctx))
		defer func() { require.NoError(t, c.Stop(ctx)) }()

		time.Sleep(2 * time.Hour)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, starts, 12)
		for i := 1; i < 10; i++ {
			assert.GreaterOrEqual(t, starts[i].Sub(starts[i-1]), 100*time.Millisecond, "a failing listener is restarted after a backoff")
		}
		assert.Greater(t, starts[10].Sub(starts[9]), starts[1].Sub(starts[0]), "the backoff grows while it keeps failing")
		lost := starts[10].Add(time.Hour)
		assert.LessOrEqual(t, starts[11].Sub(lost), starts[1].Sub(starts[0]), "after an hour of listening, the restart waited the backoff of the failures before it")
	})
}
