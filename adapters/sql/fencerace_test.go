package hooksql

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// TestCompletionRacesReclaim races the first holder's MarkDelivered (alone
// and in RecordBatch) against claims of the same deliveries by other
// workers once the first lease has expired (mock times), each new holder
// marking what it claimed delivered at once. Per delivery exactly one
// holder's write takes effect and is answered nil; every other holder's
// write is refused with ErrLeaseLost or ErrInvalidState. On PostgreSQL the
// fence is checked by the UPDATE itself, and a write refused by a claim
// that committed after the statement's snapshot must not pass for done.
func TestCompletionRacesReclaim(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		const (
			rounds   = 25
			perRound = 24
			claimers = 4
		)
		rounds_ := rounds
		if b.dialect == SQLite {
			rounds_ = 5 // one writer: no race to speak of, a smoke run
		}
		type result struct {
			holder string
			lease  hookrelay.Lease
			reason string
			err    error
		}
		for r := range rounds_ {
			now := t0.Add(time.Duration(r) * time.Hour)
			var ds []hookrelay.Delivery
			for i := range perRound {
				ds = append(ds, newDelivery(fmt.Sprintf("evt_%d_%d", r, i), fmt.Sprintf("dst_%d", i), now.Add(time.Duration(i))))
			}
			_, err := s.Create(ctx, ds)
			require.NoError(t, err)
			first, err := s.Claim(ctx, hookrelay.ClaimParams{Now: now.Add(time.Second), Limit: perRound, LeaseFor: time.Minute, Holder: "first", DefaultDestinationRoom: 1000})
			require.NoError(t, err)
			require.Len(t, first, perRound)

			var (
				mu      sync.Mutex
				results = map[string][]result{}
				wg      sync.WaitGroup
				start   = make(chan struct{})
			)
			add := func(id string, res result) {
				mu.Lock()
				results[id] = append(results[id], res)
				mu.Unlock()
			}
			mark := func(c hookrelay.Claim, holder string, at time.Time) hookrelay.MarkDeliveredParams {
				return hookrelay.MarkDeliveredParams{ID: c.Delivery.ID, Lease: c.Lease, Now: at,
					Attempt: hookrelay.Attempt{DeliveryID: c.Delivery.ID, Number: c.Delivery.Attempt, StartedAt: at,
						FinishedAt: at, Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted,
						Reason: holder, StatusCode: 200}}
			}
			// The first holder: half its writes alone, half in batches of 4.
			for k := 0; k < perRound; k += 4 {
				group := first[k : k+4]
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					at := now.Add(90 * time.Second)
					if k%8 == 0 {
						for _, c := range group {
							err := s.MarkDelivered(ctx, mark(c, "first", at))
							add(c.Delivery.ID, result{"first", c.Lease, "first", err})
						}
						return
					}
					var ws []hookrelay.LedgerWrite
					for _, c := range group {
						p := mark(c, "first", at)
						ws = append(ws, hookrelay.LedgerWrite{Delivered: &p})
					}
					errs, err := s.RecordBatch(ctx, ws)
					if !assert.NoError(t, err) {
						return
					}
					for i, c := range group {
						add(c.Delivery.ID, result{"first", c.Lease, "first", errs[i]})
					}
				}()
			}
			// Claimers after the first lease expired, each completing what it
			// claims at once.
			for w := range claimers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					holder := fmt.Sprintf("claimer_%d", w)
					at := now.Add(2 * time.Minute)
					for {
						cs, err := s.Claim(ctx, hookrelay.ClaimParams{Now: at, Limit: 2, LeaseFor: time.Minute, Holder: holder, DefaultDestinationRoom: 1000})
						if !assert.NoError(t, err) || len(cs) == 0 {
							return
						}
						var ws []hookrelay.LedgerWrite
						for _, c := range cs {
							p := mark(c, holder, at)
							ws = append(ws, hookrelay.LedgerWrite{Delivered: &p})
						}
						errs, err := s.RecordBatch(ctx, ws)
						if !assert.NoError(t, err) {
							return
						}
						for i, c := range cs {
							add(c.Delivery.ID, result{holder, c.Lease, holder, errs[i]})
						}
					}
				}()
			}
			close(start)
			wg.Wait()

			for _, d := range ds {
				rs := results[d.ID]
				var winners []result
				for _, res := range rs {
					if res.err == nil {
						winners = append(winners, res)
						continue
					}
					assert.True(t, errors.Is(res.err, hookrelay.ErrLeaseLost) || errors.Is(res.err, hookrelay.ErrInvalidState),
						"round %d %s: %s refused with %v", r, d.ID, res.holder, res.err)
				}
				if !assert.Len(t, winners, 1, "round %d %s: writes answered nil among %+v", r, d.ID, rs) {
					continue
				}
				got, err := s.Get(ctx, d.ID)
				require.NoError(t, err)
				assert.Equal(t, hookrelay.StateDelivered, got.State, "round %d %s", r, d.ID)
				assert.Equal(t, winners[0].reason, got.LastReason, "round %d %s: the write answered nil is the one stored", r, d.ID)
				as, err := s.Attempts(ctx, d.ID)
				require.NoError(t, err)
				if assert.Len(t, as, 1, "round %d %s: one attempt stored", r, d.ID) {
					assert.Equal(t, winners[0].reason, as[0].Reason, "round %d %s", r, d.ID)
				}
			}
		}
	})
}

// TestMarkDeliveredTwiceAtOnceIsOneWriteAndANoop sends the same
// MarkDelivered (same lease, same attempt) twice at once for each of many
// deliveries: marking a delivered record again is a no-op, so both calls
// answer nil and one attempt is stored. On PostgreSQL the second call's
// update waits for the first and is refused, while its snapshot still shows
// the record pending under its lease: the refusal must be judged on the
// row as the first call left it (delivered), not reported as a lost lease.
func TestMarkDeliveredTwiceAtOnceIsOneWriteAndANoop(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		const n = 60
		var ds []hookrelay.Delivery
		for i := range n {
			ds = append(ds, newDelivery(fmt.Sprintf("evt_twice_%d", i), fmt.Sprintf("dst_%d", i%6), t0.Add(time.Duration(i))))
		}
		_, err := s.Create(ctx, ds)
		require.NoError(t, err)
		cs, err := s.Claim(ctx, hookrelay.ClaimParams{Now: t0.Add(time.Second), Limit: n, LeaseFor: time.Minute, Holder: "w", DefaultDestinationRoom: 1000})
		require.NoError(t, err)
		require.Len(t, cs, n)
		at := t0.Add(2 * time.Second)
		errs := make([][2]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, c := range cs {
			p := hookrelay.MarkDeliveredParams{ID: c.Delivery.ID, Lease: c.Lease, Now: at,
				Attempt: hookrelay.Attempt{DeliveryID: c.Delivery.ID, Number: c.Delivery.Attempt, StartedAt: at,
					FinishedAt: at, Kind: hookrelay.KindDelivered, Outcome: hookrelay.OutcomeAccepted, StatusCode: 200}}
			for k := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					errs[i][k] = s.MarkDelivered(ctx, p)
				}()
			}
		}
		close(start)
		wg.Wait()
		for i, c := range cs {
			assert.NoError(t, errs[i][0], "%s: first call", c.Delivery.ID)
			assert.NoError(t, errs[i][1], "%s: second call", c.Delivery.ID)
			as, err := s.Attempts(ctx, c.Delivery.ID)
			require.NoError(t, err)
			assert.Len(t, as, 1, "%s: one attempt stored", c.Delivery.ID)
		}
	})
}
