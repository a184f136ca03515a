package hooksql

import (
	"testing"

	"github.com/hookrelay/hookrelay/hookrelaytest"
)

// TestConformance runs the whole shared suite (queue, ledger, engine,
// stats, lease ledger, redrive and the recovery rehearsal) on every
// configured backend, each test on fresh tables.
func TestConformance(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		hookrelaytest.Run(t, func(t *testing.T) hookrelaytest.Harness {
			s := newStore(t, b, Options{})
			h := hookrelaytest.Harness{Queue: s, Ledger: s, Destinations: s}
			if b.dialect != Postgres {
				h.NoDueAnnouncements = string(b.dialect) + " has no LISTEN/NOTIFY: ListenDue waits for its context and the worker polls"
			}
			return h
		})
	})
}
