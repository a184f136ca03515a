// Package recipient is the receiving side of hookrelay's HTTP delivery: a
// kit for services that accept Standard Webhooks requests, whoever sends
// them.
//
// Two middlewares, used together:
//
//	v, _ := recipient.NewVerifier(recipient.VerifierConfig{Secrets: []string{"whsec_…"}})
//	idem, _ := recipient.NewIdempotency(recipient.IdempotencyConfig{Store: recipient.NewMemoryStore()})
//	http.Handle("/webhooks", v.Middleware(idem.Middleware(handler)))
//
// The Verifier checks webhook-id, webhook-timestamp and webhook-signature
// (several accepted secrets for rotation, a timestamp tolerance of 5
// minutes by default, constant-time comparison) and answers 400, 401 or
// 413 without calling the handler when they do not hold. [Verify] does the
// same check as a function.
//
// The Idempotency middleware makes the handler's effect happen once per
// webhook-id even though delivery is at-least-once: the first request runs
// the handler and stores its response; a repeat gets the stored response
// without running the handler; a repeat that arrives while the first is
// still running gets 409 Conflict with Retry-After, which the hookrelay
// sender retries later with the same ID. A request reusing a webhook-id
// with a different body (the record keeps the body's SHA-256) gets 422
// Unprocessable Content, never another request's response. The store is a
// port
// ([IdempotencyStore]); [MemoryStore] implements it in memory, and a SQL
// implementation is one table with a unique key on the webhook-id.
//
// Only the handler's effect and the stored response are deduplicated: a
// handler with effects outside the store's transaction can still, after a
// crash between the effect and Complete, run twice once the record goes
// stale. Where that matters, write the effect and the record in one
// database transaction.
package recipient
