package recipient

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/hookrelay/hookrelay/adapters/http/internal/signature"
)

// FuzzVerify feeds arbitrary headers and bodies to the verify path, both
// Verify and the Verifier middleware: nothing panics, every refusal wraps
// one of the documented errors, and a request is accepted only if it
// carries the genuine signature of its own id, timestamp and body.
func FuzzVerify(f *testing.F) {
	key := []byte("fuzz-verify-key-0123456789abcdef")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	now := time.Unix(1_790_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	f.Add("whd_1", ts, signature.Sign(key, "whd_1", now.Unix(), []byte(`{"a":1}`)), []byte(`{"a":1}`))
	f.Add("whd_1", ts, "v1,AAAA v2,x "+signature.Sign(key, "whd_1", now.Unix(), nil), []byte(nil))
	f.Add("", "", "", []byte("{}"))
	f.Add("id", "-1", "v1,", []byte("{}"))
	f.Add("id", "99999999999999999999", "v1,abc", []byte("\x00\xff"))
	f.Add("id", ts+" ", "v1,abc=", []byte("{}"))
	// The genuine MAC spelled with its unused trailing base64 bits set: the
	// same bytes under lenient decoding, not the signature that was sent.
	genuine := signature.Sign(key, "whd_1", now.Unix(), []byte(`{"a":1}`))
	f.Add("whd_1", ts, setTrailingBits(genuine), []byte(`{"a":1}`))
	documented := []error{ErrMissingHeaders, ErrInvalidTimestamp, ErrTooManySignatures, ErrTimestampTooOld, ErrTimestampTooNew, ErrNoMatchingSignature}
	mock := clock.NewMock()
	mock.Set(now)
	v, err := NewVerifier(VerifierConfig{Secrets: []string{secret}, Clock: mock})
	if err != nil {
		f.Fatal(err)
	}
	var accepted int
	h := v.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { accepted++ }))
	f.Fuzz(func(t *testing.T, id, timestamp, sigHeader string, body []byte) {
		hdr := http.Header{}
		hdr.Set(HeaderWebhookID, id)
		hdr.Set(HeaderWebhookTimestamp, timestamp)
		hdr.Set(HeaderWebhookSignature, sigHeader)
		err := Verify(VerifyParams{Secrets: []string{secret}, Header: hdr, Body: body, Now: now})
		if err != nil {
			known := false
			for _, e := range documented {
				known = known || errors.Is(err, e)
			}
			if !known {
				t.Fatalf("undocumented error %v", err)
			}
			if strings.Contains(err.Error(), secret[6:]) {
				t.Fatalf("error holds the secret: %v", err)
			}
		} else {
			sec, perr := strconv.ParseInt(strings.TrimSpace(hdr.Get(HeaderWebhookTimestamp)), 10, 64)
			genuine := signature.Sign(key, hdr.Get(HeaderWebhookID), sec, body)
			if perr != nil || !strings.Contains(hdr.Get(HeaderWebhookSignature), strings.TrimPrefix(genuine, "v1,")) {
				t.Fatalf("accepted without the genuine signature: id %q ts %q sig %q", id, timestamp, sigHeader)
			}
		}

		req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(string(body)))
		for k, vs := range hdr {
			req.Header[k] = vs
		}
		before := accepted
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if len(body) <= 1<<20 && (accepted > before) != (err == nil) {
			t.Fatalf("middleware and Verify disagree: Verify %v, middleware status %d", err, rec.Code)
		}
	})
}

// setTrailingBits returns a "v1,<base64>" signature of a 32-byte MAC with
// the two unused bits of its last base64 character set.
func setTrailingBits(sig string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	i := len(sig) - 2 // the character before the single "=" pad
	c := strings.IndexByte(alphabet, sig[i])
	return sig[:i] + string(alphabet[c|3]) + sig[i+1:]
}
