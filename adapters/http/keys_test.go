package hookhttp

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay/adapters/http/internal/signature"
)

// TestRotatedSecretSignsTheNextAttempt: signing keys are cached, but by
// secret value, so a destination whose secret changes (same ID) is signed
// with the new secret on its very next send, and with both while both are
// active.
func TestRotatedSecretSignsTheNextAttempt(t *testing.T) {
	srv, seen := recordingServer(t, 204)
	s := newTestSender(t, Config{})
	verifies := func(i int, secret string) bool {
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		r := seen()[i]
		return wh.VerifyIgnoringTimestamp(r.body, r.header) == nil
	}
	for i, secrets := range [][]string{{testSecret}, {testSecret2}, {testSecret2, testSecret}, {testSecret}} {
		p := sendParams(srv.URL, `{"n":`+strconv.Itoa(i)+`}`)
		p.Destination.Secrets = secrets
		require.Equal(t, 204, s.Send(context.Background(), p).StatusCode)
		for _, sec := range []string{testSecret, testSecret2} {
			want := sec == secrets[0] || len(secrets) > 1 && sec == secrets[1]
			assert.Equal(t, want, verifies(i, sec), "send %d, secrets %v, verify with %s", i, secrets, sec)
		}
	}
}

// TestKeyCacheIsBoundedAndSignsAsDecoded fills the cache past its bound
// from several goroutines: it never holds more than maxCachedKeys keys
// once the adds are done, and every key it hands out, cached, evicted and
// added again or new, signs as the decoded secret does.
func TestKeyCacheIsBoundedAndSignsAsDecoded(t *testing.T) {
	var c keyCache
	secret := func(i int) string {
		return "whsec_" + base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "key-%d", i))
	}
	const workers, per = 4, maxCachedKeys/2 + 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				// Overlapping ranges: some secrets are shared, some not.
				secs := []string{secret(w*per/2 + i), secret(i % 7)}
				keys, err := c.keys(nil, secs)
				if !assert.NoError(t, err) {
					return
				}
				raw, err := decodeKeys(secs)
				require.NoError(t, err)
				if i%97 == 0 {
					assert.Equal(t, signature.Header(raw, "id", 42, []byte("body")), signature.HeaderOf(keys, "id", 42, []byte("body")))
				}
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, c.len(), maxCachedKeys)
	n := 0
	c.m.Range(func(any, any) bool { n++; return true })
	assert.Equal(t, c.len(), n, "the count matches the entries")

	_, err := c.keys(nil, []string{secret(1), "whsec_not base64!"})
	assert.EqualError(t, err, "signing secret 2 of 2: "+signature.ErrInvalidSecret.Error()+": the key is not standard base64")
}

// TestKeyCacheHoldsLongSecretsBriefly: a secret of any length signs as
// its decoded key does, but the cache keeps no secret longer than
// maxCachedSecretLen, so its bound in entries is a bound in bytes too:
// long secrets (rotated through, one per destination) cannot pin
// maxCachedKeys times their length for the Sender's lifetime.
func TestKeyCacheHoldsLongSecretsBriefly(t *testing.T) {
	var c keyCache
	for i := range 8 {
		long := "whsec_" + base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%d-%0*d", i, 64<<10, 0))
		keys, err := c.keys(nil, []string{long, testSecret})
		require.NoError(t, err)
		raw, err := decodeKeys([]string{long, testSecret})
		require.NoError(t, err)
		assert.Equal(t, signature.Header(raw, "id", 42, []byte("body")), signature.HeaderOf(keys, "id", 42, []byte("body")))
	}
	held := 0
	c.m.Range(func(k, _ any) bool { held += len(k.(string)); return true })
	assert.LessOrEqual(t, held, c.len()*maxCachedSecretLen, "bytes of secrets the cache keeps")
	assert.Equal(t, 1, c.len(), "only the short secret is kept")
}

// TestInvalidSecretDetailSaysWhatIsWrong: a secret pasted with a trailing
// space fails the send permanently, with a Detail naming its position and
// the problem, never the secret; nothing is sent.
func TestInvalidSecretDetailSaysWhatIsWrong(t *testing.T) {
	srv, seen := recordingServer(t, 204)
	s := newTestSender(t, Config{})
	p := sendParams(srv.URL, `{}`)
	p.Destination.Secrets = []string{testSecret, testSecret2 + " "}
	res := s.Send(context.Background(), p)
	assert.Equal(t, ReasonInvalidSecret, res.Reason)
	assert.Contains(t, res.Detail, "signing secret 2 of 2")
	assert.Contains(t, res.Detail, "whitespace")
	assert.NotContains(t, res.Detail, strings.TrimPrefix(testSecret2, "whsec_")[:8])
	assert.Empty(t, seen())
}
