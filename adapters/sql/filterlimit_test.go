package hooksql

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// TestDeadLetterFilterOverTheLimitIsRefusedNamingTheList shows that a
// selection of more values than a statement can carry (PostgreSQL, MySQL
// and SQLite each bound a statement's parameters, 32,766 to 65,535) is
// refused by the Client with a *hookrelay.ValidationError naming the list
// and the limit, on every dialect, before the store sees it; and that a
// list at the limit is a plain selection.
func TestDeadLetterFilterOverTheLimitIsRefusedNamingTheList(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		client, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: s})
		require.NoError(t, err)
		list := func(n int) []string {
			out := make([]string, n)
			for i := range out {
				out[i] = fmt.Sprintf("tenant_%06d", i)
			}
			return out
		}
		_, err = client.PlanRedrive(ctx, hookrelay.DeadLetterFilter{TenantIDs: list(hookrelay.MaxFilterValues)})
		require.NoError(t, err, "a list at the limit")
		_, err = client.DeadLetters(ctx, hookrelay.DeadLettersParams{Filter: hookrelay.DeadLetterFilter{DestinationIDs: list(hookrelay.MaxFilterValues)}})
		require.NoError(t, err, "a list at the limit")

		huge := list(70_000)
		for name, call := range map[string]func() error{
			"PlanRedrive": func() error {
				_, err := client.PlanRedrive(ctx, hookrelay.DeadLetterFilter{TenantIDs: huge})
				return err
			},
			"DeadLetters": func() error {
				_, err := client.DeadLetters(ctx, hookrelay.DeadLettersParams{Filter: hookrelay.DeadLetterFilter{TenantIDs: huge}})
				return err
			},
			"Redrive": func() error {
				_, err := client.Redrive(ctx, hookrelay.RedriveParams{Filter: hookrelay.DeadLetterFilter{TenantIDs: huge}, Actor: "ops", Reason: "test", RatePerSecond: 1})
				return err
			},
		} {
			err := call()
			require.ErrorIs(t, err, hookrelay.ErrInvalidRequest, "%s of %d tenants: %.300v", name, len(huge), err)
			var ve *hookrelay.ValidationError
			require.True(t, errors.As(err, &ve), name)
			assert.Equal(t, "Filter.TenantIDs", ve.Field, name)
			assert.Contains(t, ve.Problem, fmt.Sprint(hookrelay.MaxFilterValues), name)
		}
		audits, err := client.RedriveAudits(ctx, 0)
		require.NoError(t, err)
		assert.Empty(t, audits, "a refused redrive writes no audit entry")
	})
}

// TestDeadLetterFilterOfTextNoStoreHoldsIsRefusedNamingTheValue shows that
// a selection value that is not UTF-8 or holds a NUL byte (no record can
// have it; PostgreSQL refuses it as a statement parameter) is refused by
// the Client with a *hookrelay.ValidationError naming the list entry, on
// every dialect, rather than a database error on one and an empty answer
// on the others.
func TestDeadLetterFilterOfTextNoStoreHoldsIsRefusedNamingTheValue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		client, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: s})
		require.NoError(t, err)
		for _, tc := range []struct {
			filter hookrelay.DeadLetterFilter
			field  string
		}{
			{hookrelay.DeadLetterFilter{TenantIDs: []string{"tenant_a", "bad\xff"}}, "Filter.TenantIDs[1]"},
			{hookrelay.DeadLetterFilter{DestinationIDs: []string{"nul\x00inside"}}, "Filter.DestinationIDs[0]"},
			{hookrelay.DeadLetterFilter{EventTypes: []string{"a", "b", "\xc3"}}, "Filter.EventTypes[2]"},
			{hookrelay.DeadLetterFilter{Reasons: []string{"\x00"}}, "Filter.Reasons[0]"},
		} {
			_, err := client.PlanRedrive(ctx, tc.filter)
			require.ErrorIs(t, err, hookrelay.ErrInvalidRequest, "%s: %.300v", tc.field, err)
			var ve *hookrelay.ValidationError
			require.True(t, errors.As(err, &ve), tc.field)
			assert.Equal(t, tc.field, ve.Field)
			_, err = client.DeadLetters(ctx, hookrelay.DeadLettersParams{Filter: tc.filter})
			require.ErrorIs(t, err, hookrelay.ErrInvalidRequest, "%s: %.300v", tc.field, err)
		}
	})
}

// TestDeadLetterCursorAndTimesNoStoreHoldsAreRefused shows that a cursor
// whose ID is not UTF-8 (PostgreSQL refuses it as a parameter) or whose
// time is outside the storable range, and a DeadSince or DeadBefore
// outside it (every SQL store refuses to encode it), are refused by the
// Client with a *hookrelay.ValidationError naming the field, on every
// dialect, rather than a database or encoding error from one store and an
// answer from another.
func TestDeadLetterCursorAndTimesNoStoreHoldsAreRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := newStore(t, b, Options{})
		client, err := hookrelay.New(hookrelay.Config{Queue: s, Ledger: s, Destinations: s})
		require.NoError(t, err)
		ancient := time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
		for _, tc := range []struct {
			params hookrelay.DeadLettersParams
			field  string
		}{
			{hookrelay.DeadLettersParams{Cursor: hookrelay.DeadLetterCursor{DeadAt: t0, ID: "whd_\xff"}.String()}, "Cursor"},
			{hookrelay.DeadLettersParams{Cursor: hookrelay.DeadLetterCursor{DeadAt: t0, ID: "whd_\x00"}.String()}, "Cursor"},
			{hookrelay.DeadLettersParams{Cursor: base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%d|whd_1", int64(math.MinInt64))))}, "Cursor"},
			{hookrelay.DeadLettersParams{Filter: hookrelay.DeadLetterFilter{DeadSince: ancient}}, "Filter.DeadSince"},
			{hookrelay.DeadLettersParams{Filter: hookrelay.DeadLetterFilter{DeadBefore: ancient}}, "Filter.DeadBefore"},
		} {
			_, err := client.DeadLetters(ctx, tc.params)
			require.ErrorIs(t, err, hookrelay.ErrInvalidRequest, "%s: %.300v", tc.field, err)
			var ve *hookrelay.ValidationError
			require.True(t, errors.As(err, &ve), tc.field)
			assert.Equal(t, tc.field, ve.Field)
		}
		_, err = client.PlanRedrive(ctx, hookrelay.DeadLetterFilter{DeadSince: ancient})
		require.ErrorIs(t, err, hookrelay.ErrInvalidRequest, "PlanRedrive: %.300v", err)
	})
}
