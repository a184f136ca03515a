package hookrelay

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// CircuitState is the state of a destination's circuit breaker.
type CircuitState string

const (
	// CircuitClosed: deliveries are sent. A stored state with no circuit
	// (the empty string) is closed too.
	CircuitClosed CircuitState = "closed"
	// CircuitOpen: Config.CircuitFailureThreshold attempts in a row failed;
	// nothing is sent until GuardState.OpenUntil.
	CircuitOpen CircuitState = "open"
	// CircuitHalfOpen: the cool-down ended and one probe delivery is being
	// sent (GuardState.Probe holds it until OpenUntil); its outcome closes
	// or re-opens the circuit.
	CircuitHalfOpen CircuitState = "half_open"
)

// GuardState is one destination's protection state: its rate-limit bucket,
// a hold a recipient asked for (Retry-After), its circuit breaker and how
// long it has been failing. It is kept in the Destinations store
// (DestinationGuard), so every worker process sharing the store sees and
// spends the same state. A destination never guarded has the zero state.
type GuardState struct {
	DestinationID string
	// Tokens is the rate-limit bucket's content at RefilledAt: a send takes
	// one; it refills at the destination's MaxPerSecond up to one second's
	// worth. A zero RefilledAt is a full bucket.
	Tokens     float64
	RefilledAt time.Time
	// LimitedUntil is when the bucket next holds a token, set when a send
	// found it empty: claims skip the destination until then.
	LimitedUntil time.Time
	// HeldUntil is the end of a hold the recipient asked for with a 429 or
	// 503 and Retry-After: no delivery to it is sent before.
	HeldUntil time.Time
	// ConsecutiveFailures counts the failed attempts (retryable results:
	// refused connections, timeouts, 5xx) since the last success.
	ConsecutiveFailures int
	// Circuit is the circuit breaker's state ("" reads as closed).
	Circuit CircuitState
	// OpenUntil is when an open circuit's cool-down ends, or when a
	// half-open circuit's probe (Probe) is given up and another may start.
	OpenUntil time.Time
	// Probe names the delivery sent as the half-open probe.
	Probe string
	// FailingSince is when the current run of failed attempts began; zero
	// after a success (or once the run disabled the destination).
	FailingSince time.Time
}

// IsOpen reports whether the circuit is open or half-open.
func (g GuardState) IsOpen() bool { return g.Circuit == CircuitOpen || g.Circuit == CircuitHalfOpen }

// ClaimableAt is the time before which no delivery to the destination may
// be sent: the latest of HeldUntil, LimitedUntil and, while the circuit is
// not closed, OpenUntil. Stores that skip guarded destinations in a claim
// (the SQL store) skip those whose ClaimableAt is after the claim's Now.
func (g GuardState) ClaimableAt() time.Time {
	t := g.HeldUntil
	if g.LimitedUntil.After(t) {
		t = g.LimitedUntil
	}
	if g.IsOpen() && g.OpenUntil.After(t) {
		t = g.OpenUntil
	}
	return t
}

// GuardMap is a DestinationGuard kept in one process's memory: the memory
// adapter's, and the client's own when its Destinations port has none (a
// rate limit then holds per process, a hold or an open circuit is not
// shared). The zero value is ready; it is safe for concurrent use.
type GuardMap struct {
	mu sync.Mutex
	m  map[string]GuardState
}

// UpdateGuard implements DestinationGuard under the map's lock.
func (l *GuardMap) UpdateGuard(ctx context.Context, p UpdateGuardParams) (GuardState, error) {
	if err := ctx.Err(); err != nil {
		return GuardState{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]GuardState{}
	}
	g, ok := l.m[p.DestinationID]
	if !ok {
		g = GuardState{DestinationID: p.DestinationID}
	}
	g = p.Update(g)
	g.DestinationID = p.DestinationID
	l.m[p.DestinationID] = g
	return g, nil
}

// GuardStates implements DestinationGuard.
func (l *GuardMap) GuardStates(ctx context.Context, p GuardStatesParams) ([]GuardState, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []GuardState
	if len(p.IDs) > 0 {
		seen := make(map[string]bool, len(p.IDs))
		for _, id := range p.IDs {
			if g, ok := l.m[id]; ok && !seen[id] { // an ID asked twice is answered once
				seen[id] = true
				out = append(out, g)
			}
		}
	} else {
		for _, g := range l.m {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b GuardState) int { return strings.Compare(a.DestinationID, b.DestinationID) })
	return out, nil
}

// validRate reports whether v is a usable MaxPerSecond: finite and not
// negative (zero is no limit).
func validRate(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }

// MaxDestinationSecrets bounds a destination's Secrets. Every secret signs
// every send (an HMAC over the whole payload and about 45 bytes of
// webhook-signature header each); a rotation needs two or three.
const MaxDestinationSecrets = 16

// ValidateLimits checks what a destination may ask of the sender: its rate
// limit (MaxPerSecond must be finite and not negative), its MaxConcurrency
// (zero or positive, at most math.MaxInt32), how many Secrets
// sign each send (at most MaxDestinationSecrets), that its URL and each
// secret are valid UTF-8 without a NUL byte (a store keeping text would
// change such bytes, and a changed secret signs with another key), and its
// Headers (ValidateHeaders). Stores call it on Put. The errors never hold
// the URL, a secret or a header's value.
func (d Destination) ValidateLimits() error {
	if !validRate(d.MaxPerSecond) {
		return invalid(ErrInvalidDestination, "MaxPerSecond", fmt.Sprintf("is %v; it must be zero (no limit) or a finite positive rate", d.MaxPerSecond))
	}
	if d.MaxConcurrency < 0 || d.MaxConcurrency > math.MaxInt32 {
		// A 32-bit integer column of PostgreSQL and MySQL holds it.
		return invalid(ErrInvalidDestination, "MaxConcurrency", fmt.Sprintf("is %d; it must be zero (the client's PerDestinationConcurrency) or a positive cap of at most %d", d.MaxConcurrency, math.MaxInt32))
	}
	if problem := unstorableText(d.URL); problem != "" {
		return invalid(ErrInvalidDestination, "URL", problem)
	}
	if len(d.Secrets) > MaxDestinationSecrets {
		return invalid(ErrInvalidDestination, "Secrets", fmt.Sprintf("has %d secrets, over the limit of %d (each signs every send)", len(d.Secrets), MaxDestinationSecrets))
	}
	for i, secret := range d.Secrets {
		if problem := unstorableText(secret); problem != "" {
			return invalid(ErrInvalidDestination, fmt.Sprintf("Secrets[%d]", i), problem)
		}
	}
	return ValidateHeaders(d.Headers)
}

// admission is what the guard says about one send.
type admission struct {
	ok     bool
	reason string    // release reason when !ok
	until  time.Time // when to look again when !ok
	probe  bool      // this send is the half-open circuit's probe
}

// guardRules are the client's guard settings for one destination.
type guardRules struct {
	rate      float64 // sends per second; 0: no limit
	threshold int     // failures in a row that open the circuit; 0: off
	coolDown  time.Duration
	probeFor  time.Duration // how long a probe holds the half-open circuit
	recheck   time.Duration // how soon a delivery waiting on a probe or a slow rate looks again
	disableAt time.Duration // failing span that disables; 0: off
}

// check decides a send from g without changing it: it says whether the
// send must wait, and whether the state must be updated (a token taken, a
// probe started) before it may go.
func (r guardRules) check(g GuardState, now time.Time) (admission, bool) {
	switch {
	case now.Before(g.HeldUntil):
		return admission{reason: ReasonDestinationHeld, until: g.HeldUntil}, false
	case r.threshold > 0 && g.IsOpen() && now.Before(g.OpenUntil):
		until := g.OpenUntil
		if g.Circuit == CircuitHalfOpen && r.recheck > 0 {
			// The probe's answer may close the circuit long before its
			// lease runs out: look again soon, not only then.
			if soon := now.Add(r.recheck); soon.Before(until) {
				until = soon
			}
		}
		return admission{reason: ReasonCircuitOpen, until: until}, false
	case r.rate > 0 && now.Before(g.LimitedUntil):
		return admission{reason: ReasonDestinationRateLimited, until: g.LimitedUntil}, false
	}
	return admission{ok: true}, r.rate > 0 || r.threshold > 0 && g.IsOpen()
}

// admit decides a send from the stored state g and returns the state to
// store: a token taken from the bucket, a probe started on a circuit whose
// cool-down ended. It runs inside UpdateGuard.
func (r guardRules) admit(g GuardState, now time.Time, probe string) (GuardState, admission) {
	if a, _ := r.check(g, now); !a.ok {
		return g, a
	}
	isProbe := false
	if r.threshold > 0 && g.IsOpen() {
		// The cool-down (or the last probe's time) is over: this send is
		// the probe, and every other waits for its outcome.
		g.Circuit, g.Probe, g.OpenUntil = CircuitHalfOpen, probe, storableAfter(now, r.probeFor)
		isProbe = true
	}
	if r.rate > 0 {
		burst := max(r.rate, 1)
		tokens := burst
		at := now // the bucket's new refill time
		if !g.RefilledAt.IsZero() {
			// A clock that went back (before RefilledAt) refills nothing;
			// it must not drain the bucket by the step times the rate.
			tokens = min(burst, g.Tokens+r.rate*max(now.Sub(g.RefilledAt), 0).Seconds())
			if back := g.RefilledAt.Sub(now); back > 0 && back.Seconds() <= burst/r.rate {
				// A time read before a slower path to the store (a guard
				// row another worker held locked) than an attempt that read
				// a later one: the refill time stays, or the span between
				// them was refilled twice and the bucket let more through
				// than its rate. Further back than the bucket takes to fill
				// (a clock that was set back) the refill starts afresh, so
				// the destination is not held for the whole step.
				at = g.RefilledAt
			}
		}
		if tokens < 1 {
			g.Tokens, g.RefilledAt, g.LimitedUntil = tokens, at, at.Add(r.tokenWait(tokens, at))
			if isProbe {
				// No probe after all: let the next send that has a token be it.
				g.Circuit, g.Probe, g.OpenUntil = CircuitOpen, "", now
			}
			return g, admission{reason: ReasonDestinationRateLimited, until: g.LimitedUntil}
		}
		g.Tokens, g.RefilledAt = tokens-1, at
	}
	return g, admission{ok: true, probe: isProbe}
}

// tokenWait is how long a destination whose bucket holds tokens (fewer
// than one) waits before it is looked at again: until the bucket holds one
// at r's rate, but no longer than recheck (PausedRecheck, as a pause is
// looked at), so that a rate raised or removed meanwhile (one set too low
// by mistake) takes effect, where the old rate's slot (hours, years) held
// the deliveries, the worker and the store's claims; the bucket, not this
// wait, keeps the pace. Nor past what a store can hold. It is worked out in
// floating point: a rate small enough (1e-12) for the wait to pass
// time.Duration's range overflowed to a wait in the past, and the delivery
// was released, claimed again at once and released again, in a loop.
func (r guardRules) tokenWait(tokens float64, now time.Time) time.Duration {
	limit := maxStorableTime.Sub(now)
	if r.recheck > 0 {
		limit = min(limit, r.recheck)
	}
	if w := math.Ceil((1 - tokens) / r.rate * float64(time.Second)); w < float64(limit) {
		return time.Duration(w)
	}
	return limit
}

// storableAfter is d after now, or the latest time a store can hold when
// that is later: an uncapped policy's Retry-After of centuries, or a
// cool-down as long, made a hold or an open circuit every store but the
// memory one refused, so the attempt's failure and hold went unrecorded.
func storableAfter(now time.Time, d time.Duration) time.Time {
	if d >= maxStorableTime.Sub(now) {
		return maxStorableTime
	}
	return now.Add(d)
}

// guardOutcome is what an attempt's result did to a destination's state.
type guardOutcome struct {
	held     bool // a hold was recorded
	opened   bool // the circuit opened (or re-opened after a failed probe)
	closed   bool // the circuit closed
	disable  bool // the destination failed for the whole span: disable it
	failures int
}

// outcomeKind sorts a result for the guard.
type outcomeKind int

const (
	outcomeNeutral outcomeKind = iota // a permanent rejection: the recipient is up, the request was bad
	outcomeSuccess
	outcomeFailure
)

func guardKind(res Result) outcomeKind {
	switch res.Kind {
	case KindDelivered:
		return outcomeSuccess
	case KindRetryable:
		return outcomeFailure
	}
	return outcomeNeutral
}

// holdFor returns the hold a result asks for: a 429 or 503 with
// Retry-After, capped at maxDelay (a Retry-After is never honoured beyond
// the policy's cap); zero otherwise.
func holdFor(res Result, maxDelay time.Duration) time.Duration {
	if res.Kind != KindRetryable || res.RetryAfter <= 0 {
		return 0
	}
	if res.StatusCode != 429 && res.StatusCode != 503 && res.Reason != ReasonRateLimited && res.Reason != ReasonServiceUnavailable {
		return 0
	}
	return min(res.RetryAfter, maxDelay)
}

// needsRecord reports whether an attempt's result changes g (as this
// worker last saw it), so that successes to a healthy destination cost no
// store write.
func (r guardRules) needsRecord(g GuardState, res Result, hold time.Duration, probe bool) bool {
	if hold > 0 || probe {
		return true
	}
	switch guardKind(res) {
	case outcomeFailure:
		return r.threshold > 0 || r.disableAt > 0
	case outcomeSuccess:
		return g.ConsecutiveFailures > 0 || g.IsOpen() || !g.FailingSince.IsZero()
	}
	return false
}

// record applies an attempt's result to g. probe names the probe delivery
// when this attempt was one. It runs inside UpdateGuard.
func (r guardRules) record(g GuardState, now time.Time, res Result, hold time.Duration, probe string) (GuardState, guardOutcome) {
	var o guardOutcome
	if until := storableAfter(now, hold); hold > 0 && until.After(g.HeldUntil) {
		g.HeldUntil = until
		o.held = true
	}
	wasProbe := probe != "" && g.Circuit == CircuitHalfOpen && g.Probe == probe
	switch guardKind(res) {
	case outcomeSuccess:
		o.closed = g.IsOpen()
		g.ConsecutiveFailures, g.FailingSince = 0, time.Time{}
		g.Circuit, g.Probe, g.OpenUntil = CircuitClosed, "", time.Time{}
	case outcomeNeutral:
		if wasProbe { // the recipient answered: it is up
			o.closed = true
			g.ConsecutiveFailures = 0
			g.Circuit, g.Probe, g.OpenUntil = CircuitClosed, "", time.Time{}
		}
	case outcomeFailure:
		g.ConsecutiveFailures++
		if g.FailingSince.IsZero() {
			g.FailingSince = now
		}
		if r.threshold > 0 && (wasProbe || !g.IsOpen() && g.ConsecutiveFailures >= r.threshold) {
			g.Circuit, g.Probe, g.OpenUntil = CircuitOpen, "", storableAfter(now, r.coolDown)
			o.opened = true
		}
		if r.disableAt > 0 && !now.Before(g.FailingSince.Add(r.disableAt)) {
			// Disabled now; a human re-enables it, and failing starts afresh.
			o.disable = true
			g.FailingSince = time.Time{}
		}
	}
	o.failures = g.ConsecutiveFailures
	return g, o
}

// guardCache keeps the guard states this worker last read or wrote, for
// Config.DestinationCacheTTL (and, for a state that holds the destination,
// until the hold ends), so a send to a healthy destination needs no store
// round trip. It is part of the worker's state.
//
// A store call for a destination and the put of what it returned happen
// under that destination's stripe of ordered (inOrder), so the cache never
// goes back to an older state: two attempts that failed at once each wrote
// a failure, and the one whose write the store ran first could put its
// answer (circuit still closed) after the other had put the newer one (the
// circuit it opened), so the next attempt found the circuit closed and was
// sent. UpdateGuard is atomic per destination in the store anyway, so
// taking turns here costs no concurrency the store would have given.
type guardCache struct {
	mu      sync.Mutex
	entries expiring[GuardState]
	ordered [guardStripes]sync.Mutex
}

// guardStripes is how many locks order the store calls of guardCache's
// destinations: destinations that share one take turns too.
const guardStripes = 64

// guardSeed hashes destination IDs to guardCache's stripes.
var guardSeed = maphash.MakeSeed()

// inOrder locks the stripe of destination id for a store call and the put
// of its result; the caller unlocks it.
func (gc *guardCache) inOrder(id string) *sync.Mutex {
	m := &gc.ordered[maphash.String(guardSeed, id)%guardStripes]
	m.Lock()
	return m
}

func (gc *guardCache) get(id string, now time.Time) (GuardState, bool) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if g, ok := gc.entries.get(id, now); ok {
		return g, true
	}
	return GuardState{DestinationID: id}, false
}

func (gc *guardCache) put(g GuardState, now time.Time, ttl time.Duration) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	until := now.Add(max(ttl, 0))
	if c := g.ClaimableAt(); c.After(until) {
		until = c
	}
	gc.entries.put(g.DestinationID, g, until, now)
}

// forget drops what the cache holds of destination id, with id's stripe
// of ordered held by the caller.
func (gc *guardCache) forget(id string) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	gc.entries.forget(id)
}

// recheckBlocked looks again, at most once every PausedRecheck, at the
// stored guard states of the destinations this worker skips for their
// guard, in one GuardStates call, and stops skipping (and forgets what it
// cached of) those whose state now holds them for less: another process
// cleared the guard (ClearDestinationGuard from an operator's CLI), which
// otherwise took effect here only once the hold it lifted, of up to the
// policy's MaxDelay, had run out. A failed read is reported as a worker
// error; the destinations stay skipped until the next look.
func (c *Client) recheckBlocked(ctx context.Context, now time.Time) {
	w := &c.worker
	w.mu.Lock()
	if len(w.blocked) == 0 || now.Before(w.blockedRecheckAt) {
		w.mu.Unlock()
		return
	}
	w.blockedRecheckAt = now.Add(c.cfg.PausedRecheck)
	ids := make([]string, 0, len(w.blocked))
	for id, until := range w.blocked {
		if now.Before(until) {
			ids = append(ids, id)
		}
	}
	w.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	gs, err := c.guard.GuardStates(ctx, GuardStatesParams{IDs: ids})
	if err != nil {
		c.observe(ctx, Event{Name: EventWorkerError, Err: opErr("destinations.guard_states", "", err)})
		return
	}
	stored := make(map[string]time.Time, len(gs))
	for _, g := range gs {
		stored[g.DestinationID] = g.ClaimableAt()
	}
	for _, id := range ids {
		at := stored[id] // none stored: nothing holds it
		w.mu.Lock()
		until, ok := w.blocked[id]
		shorter := ok && at.Before(until)
		if shorter {
			if at.After(now) {
				w.blocked[id] = at
			} else {
				delete(w.blocked, id)
			}
		}
		w.mu.Unlock()
		if shorter {
			// The cache would hold the old state (until its end) and
			// skip the destination again at its next attempt.
			ordered := w.guards.inOrder(id)
			w.guards.forget(id)
			ordered.Unlock()
		}
	}
}

// rulesFor returns the client's guard rules for dest.
func (c *Client) rulesFor(dest Destination) guardRules {
	rate := dest.MaxPerSecond
	if rate == 0 {
		rate = c.cfg.DefaultMaxPerSecond
	}
	return guardRules{
		rate: rate, threshold: c.cfg.CircuitFailureThreshold, coolDown: c.cfg.CircuitCoolDown,
		probeFor: c.cfg.LeaseFor, recheck: c.cfg.PausedRecheck, disableAt: c.cfg.DisableAfterFailingFor,
	}
}

// guardState returns the destination's guard state: for the worker's own
// attempts (cached) from the cache while it is fresh
// (Config.DestinationCacheTTL, or until the hold it records ends); read from
// the store otherwise. It is read even when no rule of this client's needs it,
// since a hold or an open circuit another worker recorded holds this one too,
// whatever its store's claim skips.
func (c *Client) guardState(ctx context.Context, id string, cached bool, now time.Time) (GuardState, error) {
	g, ok := c.worker.guards.get(id, now)
	if cached && ok {
		return g, nil
	}
	defer c.worker.guards.inOrder(id).Unlock()
	gs, err := c.guard.GuardStates(ctx, GuardStatesParams{IDs: []string{id}})
	if err != nil {
		return g, opErr("destinations.guard_states", "", err)
	}
	g = GuardState{DestinationID: id}
	if len(gs) > 0 {
		g = gs[0]
	}
	c.worker.guards.put(g, now, c.cfg.DestinationCacheTTL)
	return g, nil
}

// admitSend decides whether a delivery may be sent now under its
// destination's guard, taking a rate-limit token or starting a probe in the
// store when the rules say so.
func (c *Client) admitSend(ctx context.Context, d Delivery, rules guardRules, cached bool, now time.Time) (admission, error) {
	g, err := c.guardState(ctx, d.DestinationID, cached, now)
	if err != nil {
		return admission{}, err
	}
	a, update := rules.check(g, now)
	if !a.ok || !update {
		return a, nil
	}
	return c.admitInStore(ctx, d.DestinationID, d.ID, rules, now)
}

// admitInStore takes a token or starts a probe in the store. It is apart
// from admitSend so that what its closure captures is allocated only when
// a rule needs the store.
func (c *Client) admitInStore(ctx context.Context, destID, deliveryID string, rules guardRules, now time.Time) (admission, error) {
	var a admission
	defer c.worker.guards.inOrder(destID).Unlock()
	g, err := c.guard.UpdateGuard(ctx, UpdateGuardParams{DestinationID: destID, Update: func(g GuardState) GuardState {
		g, a = rules.admit(g, now, deliveryID)
		return g
	}})
	if err != nil {
		return admission{}, opErr("destinations.update_guard", deliveryID, err)
	}
	c.worker.guards.put(g, now, c.cfg.DestinationCacheTTL)
	return a, nil
}

// giveBackProbe ends the half-open circuit's probe d that our shutdown cut
// short, without an outcome: the circuit stays open, and the next delivery
// admitted is the probe, at once rather than once d's probe lease
// (LeaseFor) ran out. A failed write is reported as a worker error; the
// lease runs out then as before.
func (c *Client) giveBackProbe(ctx context.Context, d Delivery, now time.Time) {
	c.updateGuard(ctx, d, now, func(g GuardState) GuardState {
		if g.Circuit == CircuitHalfOpen && g.Probe == d.ID {
			g.Circuit, g.Probe, g.OpenUntil = CircuitOpen, "", now
		}
		return g
	})
}

// updateGuard applies update to the guard state of d's destination in the
// store, in this process's order of updates to that destination, and keeps
// what the store returned in the worker's cache. A failed write is
// reported as a worker error, and ok is false.
func (c *Client) updateGuard(ctx context.Context, d Delivery, now time.Time, update func(GuardState) GuardState) (g GuardState, ok bool) {
	ordered := c.worker.guards.inOrder(d.DestinationID)
	g, err := c.guard.UpdateGuard(ctx, UpdateGuardParams{DestinationID: d.DestinationID, Update: update})
	if err == nil {
		c.worker.guards.put(g, now, c.cfg.DestinationCacheTTL)
	}
	ordered.Unlock()
	if err != nil {
		c.observe(ctx, Event{Name: EventWorkerError, Delivery: d, Err: opErr("destinations.update_guard", d.ID, err)})
		return g, false
	}
	return g, true
}

// recordOutcome applies an attempt's result to its destination's guard
// state when it changes it, and reports what changed to the observer. A
// failed write is reported as a worker error; the attempt is recorded all
// the same.
func (c *Client) recordOutcome(ctx context.Context, d *Delivery, res *Result, rules guardRules, policy Policy, probe bool, now time.Time) {
	hold := holdFor(*res, policy.MaxDelay)
	g, _ := c.worker.guards.get(d.DestinationID, now)
	if !rules.needsRecord(g, *res, hold, probe) {
		return
	}
	c.recordInStore(ctx, *d, *res, rules, hold, probe, now)
}

// recordInStore is recordOutcome's store write, apart so that what its
// closure captures is allocated only when there is something to record.
func (c *Client) recordInStore(ctx context.Context, d Delivery, result Result, rules guardRules, hold time.Duration, probe bool, now time.Time) {
	res := &result
	probeID := ""
	if probe {
		probeID = d.ID
	}
	var o guardOutcome
	g, ok := c.updateGuard(ctx, d, now, func(g GuardState) GuardState {
		g, o = rules.record(g, now, *res, hold, probeID)
		return g
	})
	if !ok {
		return
	}
	if at := g.ClaimableAt(); at.After(now) {
		c.worker.block(d.DestinationID, at)
	}
	if o.held {
		c.observe(ctx, Event{Name: EventDestinationHeld, Delivery: d, Result: res, Reason: res.Reason, At: g.HeldUntil, Delay: hold})
	}
	if o.opened {
		c.observe(ctx, Event{Name: EventCircuitOpened, Delivery: d, Result: res, Reason: res.Reason, At: g.OpenUntil, Delay: rules.coolDown, Count: int64(o.failures)})
	}
	if o.closed {
		c.worker.unblock(d.DestinationID)
		c.observe(ctx, Event{Name: EventCircuitClosed, Delivery: d, Result: res})
	}
	if o.disable {
		if err := c.destinations.Disable(ctx, DisableParams{ID: d.DestinationID, Reason: ReasonDestinationFailing, Now: now}); err != nil {
			c.observe(ctx, Event{Name: EventWorkerError, Delivery: d, Err: opErr("destinations.disable", d.ID, err)})
			return
		}
		c.worker.dests.forget(d.DestinationID)
		c.observe(ctx, Event{Name: EventDestinationDisabled, Delivery: d, Result: res, Reason: ReasonDestinationFailing, Delay: rules.disableAt})
	}
}
