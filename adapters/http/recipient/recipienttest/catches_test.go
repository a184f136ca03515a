package recipienttest_test

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hookrelay/hookrelay/adapters/http/recipient"
	"github.com/hookrelay/hookrelay/adapters/http/recipient/recipienttest"
)

const brokenPurgeEnv = "RECIPIENTTEST_BROKEN_PURGE"

// purgesByAge is a memory store whose purge makes a mistake a SQL store
// written from the docs alone could make (DELETE … WHERE started_at < ?):
// it also removes records in progress begun before the cutoff.
type purgesByAge struct {
	*recipient.MemoryStore
	mu      sync.Mutex
	running map[string]recipient.BeginParams
	tokens  map[string]string
}

func (s *purgesByAge) Begin(ctx context.Context, p recipient.BeginParams) (recipient.BeginResult, error) {
	r, err := s.MemoryStore.Begin(ctx, p)
	if err == nil && r.State == recipient.StateStarted {
		s.mu.Lock()
		s.running[p.Key], s.tokens[p.Key] = p, r.Token
		s.mu.Unlock()
	}
	return r, err
}

func (s *purgesByAge) purge(ctx context.Context, before time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int64(s.MemoryStore.Purge(before))
	for k, p := range s.running {
		if p.Now.Before(before) && s.MemoryStore.Abandon(ctx, recipient.AbandonParams{Key: k, Token: s.tokens[k]}) == nil {
			n++
		}
		delete(s.running, k)
	}
	return n, nil
}

// TestBrokenPurge runs RunPurge on the broken store, in the child process
// TestPurgeSuiteCatchesABrokenStore starts.
func TestBrokenPurge(t *testing.T) {
	if os.Getenv(brokenPurgeEnv) == "" {
		t.Skip("run by TestPurgeSuiteCatchesABrokenStore")
	}
	recipienttest.RunPurge(t, func(*testing.T) (recipient.IdempotencyStore, recipienttest.Purge) {
		s := &purgesByAge{MemoryStore: recipient.NewMemoryStore(), running: map[string]recipient.BeginParams{}, tokens: map[string]string{}}
		return s, s.purge
	})
}

func TestPurgeSuiteCatchesABrokenStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child test process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBrokenPurge$", "-test.v")
	cmd.Env = append(os.Environ(), brokenPurgeEnv+"=1")
	out, err := cmd.CombinedOutput()
	assert.Error(t, err, "the suite passed a purge that removes records in progress:\n%s", out)
	assert.Contains(t, string(out), "--- FAIL: TestBrokenPurge/NeverRemovesARecordInProgress")
	assert.Contains(t, string(out), "--- PASS: TestBrokenPurge/RemovesWhatCompletedBeforeTheCutoff",
		"only the case about records in progress fails")
}
