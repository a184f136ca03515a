package hookrelay

import "time"

// expiring is a map whose entries each stay valid until a time of their
// own: the worker's caches of what its stores said about a destination
// (destinationCache, guardCache). Its caller holds the lock.
//
// An expired entry is dropped when its key is put again, and by a sweep
// that looks at every entry. A sweep runs when an insert finds the map
// grown to twice its size after the last sweep (and to at least
// expiringSweepMin), so sweeps cost a constant per insert, and the map
// holds at most about twice the entries still valid. Sweeping on every
// insert once the map passed a fixed size made each insert cost the
// whole map while more destinations than that were in use within a TTL:
// with 5,000 destinations, half a worker's CPU per delivery went there
// (BenchmarkWorkerManyDestinations, docs/benchmarks.md).
type expiring[V any] struct {
	entries map[string]expiringEntry[V]
	// dropped, when set, is told of each entry a sweep drops.
	dropped func(id string, v V)
	sweepAt int // the size at which the next insert sweeps; 0: expiringSweepMin
	sweeps  int // how many sweeps ran (read by tests)
}

type expiringEntry[V any] struct {
	v     V
	until time.Time
}

// expiringSweepMin is the smallest size at which an insert sweeps: a
// worker with fewer destinations in use than this never sweeps at all.
const expiringSweepMin = 1024

// get returns id's value if it is still valid at now.
func (m *expiring[V]) get(id string, now time.Time) (V, bool) {
	e, ok := m.entries[id]
	if !ok || !now.Before(e.until) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// put stores v for id until until, sweeping first when the map has grown
// enough since the last sweep.
func (m *expiring[V]) put(id string, v V, until, now time.Time) {
	if m.entries == nil {
		m.entries = map[string]expiringEntry[V]{}
	}
	if _, ok := m.entries[id]; !ok && len(m.entries) >= max(m.sweepAt, expiringSweepMin) {
		m.sweep(now)
	}
	m.entries[id] = expiringEntry[V]{v: v, until: until}
}

// sweep drops every entry expired at now and sets the size of the next
// sweep to twice what is left.
func (m *expiring[V]) sweep(now time.Time) {
	for id, e := range m.entries {
		if !now.Before(e.until) {
			delete(m.entries, id)
			if m.dropped != nil {
				m.dropped(id, e.v)
			}
		}
	}
	m.sweepAt = 2 * len(m.entries)
	m.sweeps++
}

// forget drops id.
func (m *expiring[V]) forget(id string) { delete(m.entries, id) }
