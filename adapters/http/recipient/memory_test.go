package recipient_test

import (
	"testing"

	"github.com/hookrelay/hookrelay/adapters/http/recipient"
	"github.com/hookrelay/hookrelay/adapters/http/recipient/recipienttest"
)

func TestMemoryStoreConformance(t *testing.T) {
	recipienttest.RunIdempotencyStore(t, func(*testing.T) recipient.IdempotencyStore {
		return recipient.NewMemoryStore()
	})
}
