package hooksql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// TestCreateCancelledMidwayStoresAllOrNothing cancels Create (what
// Client.EnqueueMany and Publish call on a Store) at spread-out moments
// while it writes a batch of several INSERT chunks: each call either fails
// and stores none of its deliveries, or succeeds and stores every one.
func TestCreateCancelledMidwayStoresAllOrNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b, Options{})
		at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		const n = 2*insertChunkRows + 100
		// How long an uncancelled batch takes sets the spread of the
		// cancellation moments, so some land mid-write on any machine.
		warm := make([]hookrelay.Delivery, n)
		for i := range warm {
			warm[i] = newDelivery(fmt.Sprintf("warm_%04d", i), "dest_1", at)
		}
		began := time.Now()
		_, err := s.Create(context.Background(), warm)
		require.NoError(t, err)
		full := time.Since(began)

		outcomes := map[bool]int{}
		for round := range 24 {
			ds := make([]hookrelay.Delivery, n)
			for i := range ds {
				ds[i] = newDelivery(fmt.Sprintf("evt_%02d_%04d", round, i), "dest_1", at)
			}
			ctx, cancel := context.WithTimeout(context.Background(), full*time.Duration(round)/16)
			created, err := s.Create(ctx, ds)
			cancel()
			var stored int
			require.NoError(t, s.db.QueryRowContext(context.Background(),
				s.q("SELECT COUNT(*) FROM {d} WHERE event_id LIKE ?"), fmt.Sprintf("evt_%02d_%%", round)).Scan(&stored))
			if err != nil {
				assert.ErrorIs(t, err, context.DeadlineExceeded, "round %d: the error says why", round)
				assert.Zero(t, stored, "round %d: a failed Create stores nothing", round)
			} else {
				assert.Len(t, created, n)
				assert.Equal(t, n, stored, "round %d: a Create that succeeded stored every delivery", round)
			}
			outcomes[err == nil]++
		}
		t.Logf("%s: %d rounds cancelled, %d completed (uncancelled batch %v)", b.dialect, outcomes[false], outcomes[true], full)
	})
}

// TestRecordBatchCancelledMidwayWritesAllOrNothing cancels RecordBatch at
// spread-out moments while it records a batch of finished attempts: each
// call either fails and records none of them (the deliveries are still
// pending, leased, for the lease's end to hand on), or succeeds and
// records every one. On PostgreSQL the batch is one pipeline, its own
// commit: an error after the server committed it would have the worker
// treat recorded deliveries as unrecorded.
func TestRecordBatchCancelledMidwayWritesAllOrNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b, Options{})
		const n = 400
		// batch records a batch of n finished attempts for new deliveries
		// of prefix, cancelled after cancelAfter when it is positive, and
		// returns how many of them are recorded (their lease ended) and
		// how long RecordBatch took.
		batch := func(prefix string, cancelAfter time.Duration) (int, time.Duration, error) {
			ds := make([]hookrelay.Delivery, n)
			for i := range ds {
				ds[i] = newDelivery(fmt.Sprintf("%s_%04d", prefix, i), fmt.Sprintf("dest_%d", i%4), t0)
			}
			_, err := s.Create(context.Background(), ds)
			require.NoError(t, err)
			claims, err := s.Claim(context.Background(), hookrelay.ClaimParams{Now: t0, Limit: n, LeaseFor: time.Hour, Holder: "w"})
			require.NoError(t, err)
			require.Len(t, claims, n)
			writes := make([]hookrelay.LedgerWrite, n)
			for i, c := range claims {
				a := hookrelay.Attempt{Number: 1, StartedAt: t0, FinishedAt: t0.Add(time.Second),
					Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted, StatusCode: 204}
				writes[i] = hookrelay.LedgerWrite{Delivered: &hookrelay.MarkDeliveredParams{
					ID: c.Delivery.ID, Lease: c.Lease, Now: t0.Add(time.Second), Attempt: a}}
				if i%5 == 0 {
					a.Kind, a.Outcome, a.StatusCode = hookrelay.KindRetryable, hookrelay.OutcomeRejected, 503
					a.NextAttemptAt = t0.Add(time.Minute)
					writes[i] = hookrelay.LedgerWrite{Retry: &hookrelay.RecordRetryParams{
						ID: c.Delivery.ID, Lease: c.Lease, Attempt: a, NextAttempt: 2, NextAttemptAt: t0.Add(time.Minute), Now: t0.Add(time.Second)}}
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			began := time.Now()
			if cancelAfter < 0 {
				cancel()
			} else if cancelAfter > 0 {
				defer time.AfterFunc(cancelAfter, cancel).Stop()
			}
			errs, err := s.RecordBatch(ctx, writes)
			took := time.Since(began)
			if err == nil {
				for i, e := range errs {
					require.NoError(t, e, "write %d", i)
				}
			}
			var ended int
			require.NoError(t, s.db.QueryRowContext(context.Background(),
				s.q("SELECT COUNT(*) FROM {d} WHERE event_id LIKE ? AND lease_expires_at IS NULL"), prefix+"_%").Scan(&ended))
			return ended, took, err
		}
		ended, full, err := batch("warm", 0)
		require.NoError(t, err)
		require.Equal(t, n, ended)

		outcomes := map[bool]int{}
		for round := range 24 {
			ended, _, err := batch(fmt.Sprintf("evt_%02d", round), full*time.Duration(round+1)/20)
			if err != nil {
				assert.ErrorIs(t, err, context.Canceled, "round %d: the error says why", round)
				assert.Zero(t, ended, "round %d: a failed RecordBatch records nothing", round)
			} else {
				assert.Equal(t, n, ended, "round %d: a RecordBatch that succeeded recorded every write", round)
			}
			outcomes[err == nil]++
		}
		t.Logf("%s: %d rounds cancelled, %d completed (uncancelled batch %v)", b.dialect, outcomes[false], outcomes[true], full)
	})
}

// TestClaimCancelledMidwayLeasesAllOrNothing cancels Claim at spread-out
// moments while it leases a batch of due deliveries, with and without
// per-destination rooms: each call either fails and leaves none of them
// leased, or succeeds and returns a claim for every delivery it leased.
// One of them is undecodable, so a claim also moves it to the dead-letter
// path. On PostgreSQL the claim is one pipeline, its own commit: an error
// after the server committed it left the deliveries leased to no one who
// knew, delayed until their lease ran out.
func TestClaimCancelledMidwayLeasesAllOrNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := newStore(t, b, Options{})
		const n = 400
		ds := make([]hookrelay.Delivery, n)
		for i := range ds {
			ds[i] = newDelivery(fmt.Sprintf("evt_%04d", i), fmt.Sprintf("dest_%d", i%4), t0)
		}
		_, err := s.Create(context.Background(), ds)
		require.NoError(t, err)
		bad := ds[0].ID
		_, err = s.db.ExecContext(context.Background(), s.q("UPDATE {d} SET scope = ? WHERE id = ?"), "{not json", bad)
		require.NoError(t, err)
		// claim claims as holder, cancelled after cancelAfter when it is
		// positive and before it starts when it is negative, and returns how many deliveries holder leased and the
		// undecodable delivery's state; then it ends every lease and makes
		// the undecodable one pending again, so the next claim finds all n
		// due again.
		claim := func(holder string, rooms bool, cancelAfter time.Duration) ([]hookrelay.Claim, int, string, time.Duration, error) {
			p := hookrelay.ClaimParams{Now: t0, Limit: n, LeaseFor: time.Hour, Holder: holder}
			if rooms {
				p.DefaultDestinationRoom = n
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if cancelAfter < 0 {
				cancel()
			} else if cancelAfter > 0 {
				defer time.AfterFunc(cancelAfter, cancel).Stop()
			}
			began := time.Now()
			claims, err := s.Claim(ctx, p)
			took := time.Since(began)
			var leased int
			require.NoError(t, s.db.QueryRowContext(context.Background(),
				s.q("SELECT COUNT(*) FROM {d} WHERE lease_holder = ? AND lease_expires_at IS NOT NULL"), holder).Scan(&leased))
			var state string
			require.NoError(t, s.db.QueryRowContext(context.Background(), s.q("SELECT state FROM {d} WHERE id = ?"), bad).Scan(&state))
			_, rerr := s.db.ExecContext(context.Background(), s.q("UPDATE {d} SET lease_expires_at = NULL, state = 'pending'"))
			require.NoError(t, rerr)
			return claims, leased, state, took, err
		}
		claims, leased, state, full, err := claim("warm", false, 0)
		require.NoError(t, err)
		require.Len(t, claims, n-1)
		require.Equal(t, n-1, leased)
		require.Equal(t, "dead", state)

		outcomes := map[bool]int{}
		for round := range 24 {
			holder := fmt.Sprintf("w%02d", round)
			cancelAfter := full * time.Duration(round/2) / 6
			if round < 2 {
				cancelAfter = -1
			}
			claims, leased, state, _, err := claim(holder, round%2 == 1, cancelAfter)
			if err != nil {
				assert.ErrorIs(t, err, context.Canceled, "round %d: the error says why", round)
				assert.Zero(t, leased, "round %d: a failed Claim leaves nothing leased", round)
				assert.Equal(t, "pending", state, "round %d: a failed Claim moves nothing", round)
			} else {
				assert.Len(t, claims, n-1, "round %d: a Claim that succeeded claimed every decodable delivery", round)
				assert.Equal(t, n-1, leased, "round %d: a Claim that succeeded leased only what it returned", round)
				assert.Equal(t, "dead", state, "round %d: a Claim that succeeded moved the undecodable delivery aside", round)
			}
			outcomes[err == nil]++
		}
		t.Logf("%s: %d rounds cancelled, %d completed (uncancelled claim %v)", b.dialect, outcomes[false], outcomes[true], full)
	})
}
