package hookrelaytest_test

import (
	"context"
	"time"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaytest"
)

// guardMistake is a memory Destinations whose UpdateGuard stores what fix
// makes of the state the update returned (old is the state it read).
type guardMistake struct {
	*memory.Destinations
	fix func(old, updated hookrelay.GuardState) hookrelay.GuardState
}

func (d *guardMistake) UpdateGuard(ctx context.Context, p hookrelay.UpdateGuardParams) (hookrelay.GuardState, error) {
	update := p.Update
	p.Update = func(g hookrelay.GuardState) hookrelay.GuardState { return d.fix(g, update(g)) }
	return d.Destinations.UpdateGuard(ctx, p)
}

func guardHarness(fix func(old, updated hookrelay.GuardState) hookrelay.GuardState) hookrelaytest.Harness {
	h := storeHarness(memory.NewStore())
	h.Destinations = &guardMistake{Destinations: memory.NewDestinations(), fix: fix}
	return h
}

// bucketPerCall keeps no bucket: every send finds it full, as a bucket
// kept per process (or per call) instead of in the store would.
func bucketPerCall(_, g hookrelay.GuardState) hookrelay.GuardState {
	g.Tokens, g.RefilledAt, g.LimitedUntil = 0, time.Time{}, time.Time{}
	return g
}

// rateLimitHeldAnHour stores a rate limit's wait an hour longer than it
// was given, as a store that worked out the next token's time by itself
// from the rate it had would: a rate raised or removed meanwhile is then
// not looked at before the hour is over.
func rateLimitHeldAnHour(old, g hookrelay.GuardState) hookrelay.GuardState {
	if g.LimitedUntil.After(old.LimitedUntil) {
		g.LimitedUntil = g.LimitedUntil.Add(time.Hour)
	}
	return g
}

// holdNotStored forgets a Retry-After hold.
func holdNotStored(old, g hookrelay.GuardState) hookrelay.GuardState {
	g.HeldUntil = old.HeldUntil
	return g
}

// holdNeverShortened keeps a Retry-After hold until it runs out, whatever
// the update made of it, as a store that worked out when a destination is
// claimable again as the later of the stored time and the new one would:
// an operator's clear is lost.
func holdNeverShortened(old, g hookrelay.GuardState) hookrelay.GuardState {
	if g.HeldUntil.Before(old.HeldUntil) {
		g.HeldUntil = old.HeldUntil
	}
	return g
}

// coolDownNeverEnds stores an opened circuit as open for good: it never
// half-opens for a probe.
func coolDownNeverEnds(_, g hookrelay.GuardState) hookrelay.GuardState {
	if g.Circuit == hookrelay.CircuitOpen {
		g.OpenUntil = g.OpenUntil.AddDate(100, 0, 0)
	}
	return g
}

// probeNotKept does not record the half-open probe: every send after the
// cool-down is a probe.
func probeNotKept(old, g hookrelay.GuardState) hookrelay.GuardState {
	if g.Circuit == hookrelay.CircuitHalfOpen {
		g.Circuit, g.Probe, g.OpenUntil = hookrelay.CircuitOpen, "", old.OpenUntil
	}
	return g
}

// failingSinceResetByFailures does not keep when the failing run began,
// so every failure starts it afresh and no run ever lasts the span.
func failingSinceResetByFailures(_, g hookrelay.GuardState) hookrelay.GuardState {
	g.FailingSince = time.Time{}
	return g
}

// unlockedGuard reads the state, computes the update and writes it back
// in two separate locked steps: concurrent updates overwrite each other.
type unlockedGuard struct{ *memory.Destinations }

func (d *unlockedGuard) UpdateGuard(ctx context.Context, p hookrelay.UpdateGuardParams) (hookrelay.GuardState, error) {
	gs, err := d.Destinations.GuardStates(ctx, hookrelay.GuardStatesParams{IDs: []string{p.DestinationID}})
	if err != nil {
		return hookrelay.GuardState{}, err
	}
	g := hookrelay.GuardState{DestinationID: p.DestinationID}
	if len(gs) > 0 {
		g = gs[0]
	}
	g = p.Update(g)
	time.Sleep(time.Millisecond) // widen the window another update races into
	return d.Destinations.UpdateGuard(ctx, hookrelay.UpdateGuardParams{DestinationID: p.DestinationID,
		Update: func(hookrelay.GuardState) hookrelay.GuardState { return g }})
}

// guardUnread keeps the states but GuardStates finds none: a worker that
// did not record a hold itself never learns of it.
type guardUnread struct{ *memory.Destinations }

func (d *guardUnread) GuardStates(context.Context, hookrelay.GuardStatesParams) ([]hookrelay.GuardState, error) {
	return nil, nil
}

// guardFirstChunkOnly reads the states of the first 512 IDs asked for, as
// a store that forgot to loop over its statements would.
type guardFirstChunkOnly struct{ *memory.Destinations }

func (d *guardFirstChunkOnly) GuardStates(ctx context.Context, p hookrelay.GuardStatesParams) ([]hookrelay.GuardState, error) {
	p.IDs = p.IDs[:min(len(p.IDs), 512)]
	return d.Destinations.GuardStates(ctx, p)
}
