package recipient_test

import (
	"context"
	"fmt"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/http/recipient"
)

// A recipient keeps each webhook-id at least as long as the sender may
// still send it, or a late retry runs the handler twice. The sender's retry
// policy gives the span its own schedule allows (Policy.MaxRetrySpan: every
// gap at the policy's longest delay, capped by its delivery window); the
// margin on top covers what no schedule bounds: a backlog or a paused
// destination delaying every attempt, and an operator's redrive sending
// the same ID days later. Purge (hourly, say) then drops what is older.
func ExampleMemoryStore_Purge_retention() {
	sender := hookrelay.DefaultPolicy() // the sender's retry policy: 7 attempts, at most 15m apart
	keep := sender.MaxRetrySpan() + 7*24*time.Hour
	fmt.Println("sender's retry span:", sender.MaxRetrySpan())
	fmt.Println("keep idempotency records for:", keep)

	ctx := context.Background()
	now := time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)
	store := recipient.NewMemoryStore() // or hooksql's Store.IdempotencyStore(), which has Purge too
	for key, at := range map[string]time.Time{"msg_last_week": now.Add(-8 * 24 * time.Hour), "msg_this_morning": now.Add(-3 * time.Hour)} {
		b, _ := store.Begin(ctx, recipient.BeginParams{Key: key, Now: at, StaleAfter: time.Minute})
		_ = store.Complete(ctx, recipient.CompleteParams{Key: key, Token: b.Token, Response: recipient.StoredResponse{Status: 204}, Now: at})
	}
	fmt.Println("purged:", store.Purge(now.Add(-keep)))
	again, _ := store.Begin(ctx, recipient.BeginParams{Key: "msg_this_morning", Now: now, StaleAfter: time.Minute})
	fmt.Println("a retry of this morning's webhook replays its response:", again.State == recipient.StateCompleted)
	// Output:
	// sender's retry span: 1h30m0s
	// keep idempotency records for: 169h30m0s
	// purged: 1
	// a retry of this morning's webhook replays its response: true
}
