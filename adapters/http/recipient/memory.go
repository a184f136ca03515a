package recipient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"time"
)

// MemoryStore is an in-memory IdempotencyStore, for tests and for a
// single-process recipient whose deduplication need not survive restarts.
// It is safe for concurrent use. Completed records are kept until Purge.
type MemoryStore struct {
	mu sync.Mutex
	m  map[string]*memRecord
}

type memRecord struct {
	token       string
	startedAt   time.Time
	completed   bool
	completedAt time.Time
	resp        StoredResponse
	bodyHash    []byte
}

var _ IdempotencyStore = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{m: map[string]*memRecord{}}
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

func cloneResponse(r StoredResponse) StoredResponse {
	r.Header = r.Header.Clone()
	r.Body = slices.Clone(r.Body)
	return r
}

// Begin implements IdempotencyStore.
func (s *MemoryStore) Begin(_ context.Context, p BeginParams) (BeginResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[p.Key]
	switch {
	case ok && r.completed:
		return BeginResult{State: StateCompleted, Response: cloneResponse(r.resp), BodyHash: slices.Clone(r.bodyHash)}, nil
	case ok && p.Now.Before(r.startedAt.Add(p.StaleAfter)):
		return BeginResult{State: StateInProgress, BodyHash: slices.Clone(r.bodyHash)}, nil
	}
	r = &memRecord{token: newToken(), startedAt: p.Now, bodyHash: slices.Clone(p.BodyHash)}
	s.m[p.Key] = r
	return BeginResult{State: StateStarted, Token: r.token}, nil
}

// Complete implements IdempotencyStore.
func (s *MemoryStore) Complete(_ context.Context, p CompleteParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[p.Key]
	if !ok || r.completed || r.token != p.Token {
		return ErrRecordLost
	}
	r.completed, r.completedAt, r.resp = true, p.Now, cloneResponse(p.Response)
	return nil
}

// Abandon implements IdempotencyStore.
func (s *MemoryStore) Abandon(_ context.Context, p AbandonParams) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[p.Key]
	if !ok || r.completed || r.token != p.Token {
		return ErrRecordLost
	}
	delete(s.m, p.Key)
	return nil
}

// Purge deletes the records completed before before and returns how many
// it deleted. Keep records longer than the sender's whole retry and
// redrive horizon, or a late repeat runs the handler again. A record in
// progress is never deleted, however old. It removes the same records as
// hooksql's IdempotencyStore.Purge (recipienttest.RunPurge runs both).
func (s *MemoryStore) Purge(before time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, r := range s.m {
		if r.completed && r.completedAt.Before(before) {
			delete(s.m, k)
			n++
		}
	}
	return n
}
