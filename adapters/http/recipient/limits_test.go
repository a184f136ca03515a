package recipient

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// signatureHeaderWith is a genuine webhook-signature for body at now,
// after n-1 other entries ("v1a,x" stands in for another scheme's).
func signatureHeaderWith(t *testing.T, n int, body []byte) http.Header {
	t.Helper()
	h := signedHeader(t, secretNew, "whd_1", now, body)
	h.Set(HeaderWebhookSignature, strings.Repeat("v1a,x ", n-1)+h.Get(HeaderWebhookSignature))
	return h
}

// TestVerifyRefusesTooManySignatureEntries: a webhook-signature with
// more than MaxSignatures entries is refused as malformed (400 from the
// middleware, before its body is read), even when its last entry is the
// genuine signature; one with exactly MaxSignatures entries verifies.
func TestVerifyRefusesTooManySignatureEntries(t *testing.T) {
	body := []byte(`{"payment_id":"pay_7319"}`)
	v, _ := verifierAtNow(t)

	atLimit := signatureHeaderWith(t, MaxSignatures, body)
	assert.NoError(t, v.Verify(atLimit, body))
	assert.NoError(t, Verify(VerifyParams{Secrets: []string{secretNew}, Header: atLimit, Body: body, Now: now}))

	over := signatureHeaderWith(t, MaxSignatures+1, body)
	assert.ErrorIs(t, v.Verify(over, body), ErrTooManySignatures)
	assert.ErrorIs(t, Verify(VerifyParams{Secrets: []string{secretNew}, Header: over, Body: body, Now: now}), ErrTooManySignatures)
	// The server's header limit is all that bounds the count otherwise.
	many := signatureHeaderWith(t, 20_000, body)
	assert.ErrorIs(t, v.Verify(many, body), ErrTooManySignatures)

	h, gotBody := echoMiddleware(t, VerifierConfig{Secrets: []string{secretNew}})
	counted := &countingBody{r: strings.NewReader(string(body))}
	req := httptest.NewRequest(http.MethodPost, "/hooks", counted)
	for k, vs := range over {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusBadRequest, rec.Code)
	assert.Contains(t, rec.Body.String(), "entries")
	assert.Zero(t, counted.read, "refused on its headers, before its body is read")
	assert.Empty(t, *gotBody, "the handler did not run")
}

// TestVerifyDoesNotDecodeMisSizedSignatures: a v1 value that is not
// 44 characters long (the padded base64 of a SHA-256 MAC) cannot be the
// signature, and costs no more than an entry of another scheme: it is not
// decoded. Measured in allocations, which a decode makes and which, unlike
// time, are counted exactly.
func TestVerifyDoesNotDecodeMisSizedSignatures(t *testing.T) {
	body := []byte(`{"payment_id":"pay_7319"}`)
	v, _ := verifierAtNow(t)
	value := strings.Repeat("A", 4000) // valid base64, of 3000 bytes
	with := func(version string) http.Header {
		h := signedHeader(t, secretNew, "whd_1", now, body)
		h.Set(HeaderWebhookSignature, strings.Repeat(version+","+value+" ", MaxSignatures-1)+h.Get(HeaderWebhookSignature))
		require.NoError(t, v.Verify(h, body))
		return h
	}
	other, v1 := with("v2"), with("v1")
	allocs := func(h http.Header) float64 {
		return testing.AllocsPerRun(20, func() { _ = v.Verify(h, body) })
	}
	// Not equal: under -race sync.Pool drops items at random, so counts
	// can drift by a few; a decode per entry costs 63 more here.
	assert.LessOrEqual(t, allocs(v1), allocs(other)+10, "a mis-sized v1 value costs what another scheme's entry costs")
}
