package recipient_test

import (
	"context"
	"time"

	"testing"

	"github.com/hookrelay/hookrelay/adapters/http/recipient"
	"github.com/hookrelay/hookrelay/adapters/http/recipient/recipienttest"
)

func TestMemoryStoreConformance(t *testing.T) {
	recipienttest.RunIdempotencyStore(t, func(*testing.T) recipient.IdempotencyStore {
		return recipient.NewMemoryStore()
	})
}

func TestMemoryStorePurgeConformance(t *testing.T) {
	recipienttest.RunPurge(t, func(*testing.T) (recipient.IdempotencyStore, recipienttest.Purge) {
		s := recipient.NewMemoryStore()
		return s, func(_ context.Context, before time.Time) (int64, error) { return int64(s.Purge(before)), nil }
	})
}
