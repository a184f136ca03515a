package hookrelay

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Held claims come back per destination in the order they were claimed,
// however adds and pops interleave: the queues reuse their arrays (moving
// claims down when full at the back), and a mistake there would start a
// newer claim first or lose one. Checked against a plain model.
func TestHeldClaimsKeepClaimOrderWhileReusingTheirArrays(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h heldClaims
	model := map[string][]string{} // per destination, IDs oldest first
	total, next := 0, 0
	base := time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC)
	for step := range 20000 {
		dest := fmt.Sprintf("d%d", rng.IntN(4))
		if rng.IntN(100) < 52 || len(model[dest]) == 0 {
			id := fmt.Sprintf("c%d", next)
			next++
			h.add(Claim{Delivery: Delivery{ID: id, DestinationID: dest}, Lease: Lease{ExpiresAt: base.Add(time.Duration(next) * time.Second)}})
			model[dest] = append(model[dest], id)
			total++
		} else {
			got := h.pop(dest)
			require.Equal(t, model[dest][0], got.Delivery.ID, "step %d: pop(%s)", step, dest)
			model[dest] = model[dest][1:]
			total--
		}
		require.Equal(t, total, h.n, "step %d", step)
		for d, ids := range model {
			require.Equal(t, len(ids), h.count(d), "step %d: count(%s)", step, d)
			if len(ids) > 0 {
				require.Equal(t, ids[0], h.byDest[d].front().Delivery.ID, "step %d: front(%s)", step, d)
			} else {
				require.NotContains(t, h.byDest, d, "step %d: an empty queue stays listed", step)
			}
		}
	}
	// A worker that held claims for many destinations at once keeps a
	// bounded number of emptied queues for reuse.
	for i := range 500 {
		h.add(Claim{Delivery: Delivery{ID: fmt.Sprintf("many%d", i), DestinationID: fmt.Sprintf("many_%d", i)}})
	}
	for i := range 500 {
		h.pop(fmt.Sprintf("many_%d", i))
	}
	require.LessOrEqual(t, len(h.spare), maxSpareQueues)
	// drain hands back every claim still held, oldest first.
	var want []string
	for i := range next {
		id := fmt.Sprintf("c%d", i)
		for _, ids := range model {
			for _, x := range ids {
				if x == id {
					want = append(want, id)
				}
			}
		}
	}
	var got []string
	for _, cl := range h.drain() {
		got = append(got, cl.Delivery.ID)
	}
	require.Equal(t, want, got)
	require.Zero(t, h.n)
}

// A freed slot starts the oldest held claim whose destination is below its
// limit: oldestStartable, which searches the heap of destinations' queues
// past those at their limits, agrees with a look at every destination,
// whichever destinations are at their limits and however adds and pops
// reorder the heap.
func TestOldestStartableIsTheOldestClaimOfADestinationBelowItsLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h heldClaims
	model := map[string][]int{} // per destination, claim numbers oldest first
	next := 0
	for step := range 20000 {
		dest := fmt.Sprintf("d%d", rng.IntN(12))
		if rng.IntN(100) < 55 || len(model[dest]) == 0 {
			h.add(Claim{Delivery: Delivery{ID: fmt.Sprint(next), DestinationID: dest}})
			model[dest] = append(model[dest], next)
			next++
		} else {
			h.pop(dest)
			model[dest] = model[dest][1:]
		}
		atLimit := map[string]bool{}
		for i := range 12 {
			if rng.IntN(3) == 0 {
				atLimit[fmt.Sprintf("d%d", i)] = true
			}
		}
		want, oldest := "", -1
		for d, claims := range model {
			if len(claims) > 0 && !atLimit[d] && (oldest < 0 || claims[0] < oldest) {
				want, oldest = d, claims[0]
			}
		}
		q := h.oldestStartable(func(id string) bool { return !atLimit[id] })
		if want == "" {
			require.Nil(t, q, "step %d: every destination with claims is at its limit", step)
			continue
		}
		require.NotNil(t, q, "step %d", step)
		require.Equal(t, want, q.id, "step %d", step)
		require.Equal(t, fmt.Sprint(oldest), q.front().Delivery.ID, "step %d", step)
	}
}
