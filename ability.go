package hookrelay

// Optional abilities are found by type assertion, like
// database/sql/driver's. Each is declared beside its port: a Ledger's in
// ledger.go (BatchLedger, LeaseLedger, UnpublishedRecovery,
// DeadLetterLedger, RedriveAuditLog, RedriveLedger, RedriveAuditLister,
// LedgerStats, AttemptStats, HistoryCleaner), a Queue's in queue.go
// (ClaimsByDestinationRoom, LedgerQueue, DueNotifier, MessageLimit), a Destinations
// port's in destination.go (DestinationFinder, DestinationBatchReader,
// DestinationEnabler, DestinationLister, DestinationPauser,
// DestinationGuard).
//
// A wrapper around a port — metrics, tracing, a fault injector — hides
// them unless it says what it wraps: a wrapper that has an Unwrap method
// returning the wrapped port (Unwrap() Ledger, Unwrap() Queue or Unwrap()
// Destinations) keeps every ability of the value it wraps, because the
// client looks for an ability through the Unwrap chain with As, as
// errors.As does for errors. BatchLedger is the one exception: a batch
// replaces the ledger's write methods, so it is used only when the
// configured Ledger implements it itself.
//
// A wrapper that implements an ability itself (to observe it, say) is found
// first; one that must hide an ability has no Unwrap method.

// maxUnwrapDepth bounds an Unwrap chain, so a wrapper that unwraps to
// itself cannot hang the client.
const maxUnwrapDepth = 64

// As reports whether v, or a port v wraps, has the ability T, and returns
// the first one found. It tries v first, then follows Unwrap() Ledger,
// Unwrap() Queue and Unwrap() Destinations methods, as errors.As follows
// Unwrap() error. Nil values are skipped. It is safe for concurrent use
// when the Unwrap methods are.
//
//	dl, ok := hookrelay.As[hookrelay.DeadLetterLedger](ledger)
func As[T any](v any) (T, bool) {
	for range maxUnwrapDepth {
		if v == nil {
			break
		}
		if t, ok := v.(T); ok {
			return t, true
		}
		next, ok := unwrapPort(v)
		if !ok {
			break
		}
		v = next
	}
	var zero T
	return zero, false
}

// unwrapPort returns the port v wraps, if v says.
func unwrapPort(v any) (any, bool) {
	switch w := v.(type) {
	case interface{ Unwrap() Ledger }:
		return w.Unwrap(), true
	case interface{ Unwrap() Queue }:
		return w.Unwrap(), true
	case interface{ Unwrap() Destinations }:
		return w.Unwrap(), true
	}
	return nil, false
}

// sameLedgerQueue reports whether q and l are, through their Unwrap
// chains, one LedgerQueue: the condition of the worker's fast path. A
// wrapper of either that delegates every call keeps the LedgerQueue's
// promises (a claim reads the record, a ledger write ends the lease).
func sameLedgerQueue(q Queue, l Ledger) bool {
	lq, ok := As[LedgerQueue](q)
	if !ok {
		return false
	}
	var v any = l
	for range maxUnwrapDepth {
		if v == nil {
			return false
		}
		if v == any(lq) {
			return true
		}
		if v, ok = unwrapPort(v); !ok {
			return false
		}
	}
	return false
}
