package hookrelaytest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// RunDestinationBatchReader runs the hookrelay.DestinationBatchReader
// contract tests; they skip when the harness's Destinations does not
// implement it (an optional ability). They check that each destination
// asked for comes back once, as Destination returns it, paused and
// disabled ones included; that unknown IDs are left out without an error;
// that IDs match exactly (case, trailing space and SQL wildcards make no
// match); that a list longer than one statement's worth is read whole; and
// that a cancelled context is refused.
func RunDestinationBatchReader(t *testing.T, newHarness NewHarness) {
	ctx := context.Background()

	t.Run("EachDestinationOnceAsDestinationReturnsIt", func(t *testing.T) {
		h := newHarness(t)
		r := batchReader(t, h)
		p := hookrelay.DefaultPolicy()
		p.Version, p.MaxAttempts = "accounting-v2", 3
		full := hookrelay.Destination{
			ID: "dest_full", TenantID: "tenant_a", URL: "https://hooks.example/in?x=1",
			Secrets:        []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
			Headers:        map[string]string{"Authorization": "Bearer t0k3n"},
			Policy:         &p,
			MaxConcurrency: 2, MaxPerSecond: 2.5, Timeout: 7 * time.Second, Paused: true,
			EventTypes: []string{"lease.*"},
		}
		require.NoError(t, h.Destinations.Put(ctx, full))
		require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_plain", URL: "https://hooks.example/plain"}))
		require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_gone", URL: "https://hooks.example/gone"}))
		require.NoError(t, h.Destinations.Disable(ctx, hookrelay.DisableParams{ID: "dest_gone", Reason: hookrelay.ReasonDestinationGone, Now: time.Now()}))
		require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_not_asked", URL: "https://hooks.example/other"}))

		got, err := r.DestinationsByID(ctx, []string{"dest_full", "dest_missing", "dest_plain", "dest_full", "dest_gone", "dest_plain"})
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"dest_full", "dest_gone", "dest_plain"}, idsOfDestinations(got),
			"each destination asked for once, paused and disabled ones included; none that was not asked for")
		for _, d := range got {
			want, err := h.Destinations.Destination(ctx, d.ID)
			require.NoError(t, err)
			assert.Equal(t, want, d, "%s as Destination returns it", d.ID)
		}
	})

	t.Run("UnknownIDsAreLeftOutWithoutAnError", func(t *testing.T) {
		h := newHarness(t)
		r := batchReader(t, h)
		got, err := r.DestinationsByID(ctx, []string{"dest_missing", "dest_also_missing"})
		require.NoError(t, err)
		assert.Empty(t, got)
		got, err = r.DestinationsByID(ctx, nil)
		require.NoError(t, err)
		assert.Empty(t, got)
	})

	t.Run("IDsMatchExactly", func(t *testing.T) {
		h := newHarness(t)
		r := batchReader(t, h)
		for _, id := range []string{"dest_a", "Dest_A", "dest_a ", "dest_ab"} {
			require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: id, URL: "https://hooks.example/" + strings.TrimSpace(id)}))
		}
		got, err := r.DestinationsByID(ctx, []string{"dest_a"})
		require.NoError(t, err)
		assert.Equal(t, []string{"dest_a"}, idsOfDestinations(got), "not its other cases, nor with a trailing space")
		got, err = r.DestinationsByID(ctx, []string{"DEST_A", "dest_%", "dest__", "dest_a*", "dest_A"})
		require.NoError(t, err)
		assert.Empty(t, idsOfDestinations(got), "no case folding and no wildcards")
	})

	t.Run("ALongListIsReadWhole", func(t *testing.T) {
		h := newHarness(t)
		r := batchReader(t, h)
		// 520 stored destinations and 1,100 IDs asked for, the stored ones
		// interleaved with unknown ones and repeats: longer than a store
		// would put in one statement (the SQL store reads 512 a statement).
		var want, ids []string
		for i := range 520 {
			id := fmt.Sprintf("dest_%04d", i)
			require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: id, URL: "https://hooks.example/" + id}))
			want = append(want, id)
			ids = append(ids, fmt.Sprintf("dest_unknown_%04d", i), id)
		}
		ids = append(ids, want[:60]...)
		got, err := r.DestinationsByID(ctx, ids)
		require.NoError(t, err)
		gotIDs := idsOfDestinations(got)
		slices.Sort(gotIDs)
		assert.Equal(t, want, gotIDs)
	})

	t.Run("CancelledContextIsRefused", func(t *testing.T) {
		h := newHarness(t)
		r := batchReader(t, h)
		require.NoError(t, h.Destinations.Put(ctx, hookrelay.Destination{ID: "dest_1", URL: "https://hooks.example/1"}))
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		_, err := r.DestinationsByID(cancelled, []string{"dest_1", "dest_2"})
		assert.ErrorIs(t, err, context.Canceled)
		_, err = r.DestinationsByID(cancelled, nil)
		assert.ErrorIs(t, err, context.Canceled, "with nothing to read as well")
	})
}

// batchReader returns the harness's DestinationBatchReader or skips the
// test.
func batchReader(t *testing.T, h Harness) hookrelay.DestinationBatchReader {
	t.Helper()
	r, ok := hookrelay.As[hookrelay.DestinationBatchReader](h.Destinations)
	if !ok {
		t.Skip("the Destinations do not implement hookrelay.DestinationBatchReader (an optional ability)")
	}
	return r
}

func idsOfDestinations(ds []hookrelay.Destination) []string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids
}
