package hookrelaytest_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/memory"
	"github.com/hookrelay/hookrelay/hookrelaytest"
)

// batchReaderHarness is the memory harness with its destinations wrapped
// by one of the broken DestinationBatchReaders below (listed in
// brokenStores).
func batchReaderHarness(wrap func(*memory.Destinations) hookrelaytest.DestinationStore) func() hookrelaytest.Harness {
	return func() hookrelaytest.Harness {
		h := storeHarness(memory.NewStore())
		h.Destinations = wrap(memory.NewDestinations())
		return h
	}
}

// lookUp reads ids one by one through Destination, keeping what it finds:
// the broken readers below are built on it.
func lookUp(ctx context.Context, d *memory.Destinations, ids []string, keep func(hookrelay.Destination) bool) ([]hookrelay.Destination, error) {
	out := []hookrelay.Destination{}
	for _, id := range ids {
		if dest, err := d.Destination(ctx, id); err == nil && keep(dest) {
			out = append(out, dest)
		}
	}
	return out, nil
}

// repeatsIDs returns a destination once for every time its ID is asked for.
type repeatsIDs struct{ *memory.Destinations }

func (s *repeatsIDs) DestinationsByID(ctx context.Context, ids []string) ([]hookrelay.Destination, error) {
	return lookUp(ctx, s.Destinations, ids, func(hookrelay.Destination) bool { return true })
}

// skipsSwitchedOff leaves out paused and disabled destinations.
type skipsSwitchedOff struct{ *memory.Destinations }

func (s *skipsSwitchedOff) DestinationsByID(ctx context.Context, ids []string) ([]hookrelay.Destination, error) {
	all, err := s.Destinations.DestinationsByID(ctx, ids)
	out := []hookrelay.Destination{}
	for _, d := range all {
		if !d.Paused && !d.Disabled {
			out = append(out, d)
		}
	}
	return out, err
}

// refusesLongReason refuses a DisabledReason over what a MySQL BLOB
// holds instead of keeping it cut, so the destination stays enabled.
type refusesLongReason struct{ *memory.Destinations }

func (s *refusesLongReason) Put(ctx context.Context, d hookrelay.Destination) error {
	if err := tooLong(d.DisabledReason); err != nil {
		return err
	}
	return s.Destinations.Put(ctx, d)
}

func (s *refusesLongReason) Disable(ctx context.Context, p hookrelay.DisableParams) error {
	if err := tooLong(p.Reason); err != nil {
		return err
	}
	return s.Destinations.Disable(ctx, p)
}

// refusesWideDestination refuses a URL, secrets or headers over what a
// MySQL BLOB holds, as schema version 10 on MySQL did.
type refusesWideDestination struct{ *memory.Destinations }

func (s *refusesWideDestination) Put(ctx context.Context, d hookrelay.Destination) error {
	headers := 0
	for k, v := range d.Headers {
		headers += len(k) + len(v)
	}
	if err := tooLong(d.URL, strings.Join(d.Secrets, ","), strings.Repeat(" ", headers)); err != nil {
		return err
	}
	return s.Destinations.Put(ctx, d)
}

// keepsFirstSecrets stores the first MaxDestinationSecrets of too many
// secrets instead of refusing the destination.
type keepsFirstSecrets struct{ *memory.Destinations }

func (s *keepsFirstSecrets) Put(ctx context.Context, d hookrelay.Destination) error {
	if len(d.Secrets) > hookrelay.MaxDestinationSecrets {
		d.Secrets = d.Secrets[:hookrelay.MaxDestinationSecrets]
	}
	return s.Destinations.Put(ctx, d)
}

// cleansText stores a URL, secrets and headers that are not UTF-8 or hold
// a NUL byte with those bytes replaced, as the SQL store once did (a TEXT
// column, JSON), instead of refusing them.
type cleansText struct{ *memory.Destinations }

func (s *cleansText) Put(ctx context.Context, d hookrelay.Destination) error {
	d.URL = hookrelay.StorableText(d.URL)
	secrets := make([]string, len(d.Secrets))
	for i, v := range d.Secrets {
		secrets[i] = hookrelay.StorableText(v)
	}
	d.Secrets = secrets
	headers := make(map[string]string, len(d.Headers))
	for k, v := range d.Headers {
		headers[hookrelay.StorableText(k)] = hookrelay.StorableText(v)
	}
	d.Headers = headers
	return s.Destinations.Put(ctx, d)
}

// clampsConcurrency stores a MaxConcurrency out of range as the nearest
// one a 32-bit column holds (a negative one as zero) instead of refusing
// it.
type clampsConcurrency struct{ *memory.Destinations }

func (s *clampsConcurrency) Put(ctx context.Context, d hookrelay.Destination) error {
	d.MaxConcurrency = min(max(d.MaxConcurrency, 0), math.MaxInt32)
	return s.Destinations.Put(ctx, d)
}

// foldsCase matches IDs without regard to case, as a case-insensitive
// collation would.
type foldsCase struct{ *memory.Destinations }

func (s *foldsCase) DestinationsByID(ctx context.Context, ids []string) ([]hookrelay.Destination, error) {
	all, err := s.Destinations.DestinationsFor(ctx, hookrelay.DestinationsForParams{})
	out := []hookrelay.Destination{}
	for _, d := range all {
		for _, id := range ids {
			if strings.EqualFold(strings.TrimSpace(d.ID), id) {
				out = append(out, d)
				break
			}
		}
	}
	return out, err
}

// firstChunkOnly reads the first 512 IDs, as a store that forgot to loop
// over its statements would.
type firstChunkOnly struct{ *memory.Destinations }

func (s *firstChunkOnly) DestinationsByID(ctx context.Context, ids []string) ([]hookrelay.Destination, error) {
	return s.Destinations.DestinationsByID(ctx, ids[:min(len(ids), 512)])
}

// failsOnUnknown refuses the whole read when one ID has no destination.
type failsOnUnknown struct{ *memory.Destinations }

func (s *failsOnUnknown) DestinationsByID(ctx context.Context, ids []string) ([]hookrelay.Destination, error) {
	out, err := s.Destinations.DestinationsByID(ctx, ids)
	if err == nil && len(out) < len(ids) {
		return nil, fmt.Errorf("%w: some of %d IDs", hookrelay.ErrDestinationNotFound, len(ids))
	}
	return out, err
}

// batchIgnoresContext reads even when the context is cancelled.
type batchIgnoresContext struct{ *memory.Destinations }

func (s *batchIgnoresContext) DestinationsByID(_ context.Context, ids []string) ([]hookrelay.Destination, error) {
	return s.Destinations.DestinationsByID(context.Background(), ids)
}

// rawIDInError names an unknown destination in its error as it was given,
// unquoted, so an ID with a line break splits the log line.
type rawIDInError struct{ *memory.Destinations }

func (s *rawIDInError) Destination(ctx context.Context, id string) (hookrelay.Destination, error) {
	d, err := s.Destinations.Destination(ctx, id)
	if errors.Is(err, hookrelay.ErrDestinationNotFound) {
		return d, fmt.Errorf("%w: %s", hookrelay.ErrDestinationNotFound, id)
	}
	return d, err
}

// refusesUnstorableIDs answers a read by an ID that is not UTF-8 with a
// store failure, as a PostgreSQL store handing it to the server does.
type refusesUnstorableIDs struct{ *memory.Store }

func (s *refusesUnstorableIDs) Get(ctx context.Context, id string) (hookrelay.Delivery, error) {
	if !utf8.ValidString(id) {
		return hookrelay.Delivery{}, errors.New("database error: invalid byte sequence for encoding UTF8")
	}
	return s.Store.Get(ctx, id)
}
