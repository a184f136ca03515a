package hookhttp

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookrelay/hookrelay"
)

// Every secret below starts with characters that no padding, mask or other
// secret contains, so "no 4-byte prefix of it survives" is a sharp check.
const (
	sweepToken   = "Qz7tok-0123456789abcdefghijklmnopqrstu" // 38 bytes, like the report's bearer token
	sweepPartner = "Pk9partner-ABCDEFGHIJKLMNOP"
	sweepUser    = "Us3rname"
	sweepPass    = "Pw4pass-zyxwvutsrqponm"
	sweepKey     = "Ky5-signing-key-bytes-0123456789" // the decoded bytes of the whsec_ key
)

// sweepDestination carries one secret of every kind.
func sweepDestination(rawURL string) hookrelay.Destination {
	return hookrelay.Destination{
		ID:  "dest-1",
		URL: strings.Replace(rawURL, "://", "://"+sweepUser+":"+sweepPass+"@", 1),
		Headers: map[string]string{
			"Authorization": "Bearer " + sweepToken,
			"X-Partner-Key": sweepPartner,
		},
		Secrets: []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte(sweepKey))},
	}
}

// leakForms are the spellings of the sweep secrets a recipient may echo,
// each with the string that must not leak (not even a 4-byte prefix).
func leakForms() []struct{ name, form, secret string } {
	basic := base64.StdEncoding.EncodeToString([]byte(sweepUser + ":" + sweepPass))
	keyB64 := base64.StdEncoding.EncodeToString([]byte(sweepKey))
	return []struct{ name, form, secret string }{
		{"authorization header", "Authorization: Bearer " + sweepToken, sweepToken},
		{"bare bearer token", sweepToken, sweepToken},
		{"custom sensitive header", "X-Partner-Key: " + sweepPartner, sweepPartner},
		{"url user info raw", "http://" + sweepUser + ":" + sweepPass + "@host/", sweepPass},
		{"url user name", "user=" + sweepUser, sweepUser},
		{"url user info as basic auth", "Authorization: Basic " + basic, basic},
		{"whsec key", "whsec_" + keyB64, keyB64},
		{"whsec key without prefix", keyB64, keyB64},
		{"whsec decoded key bytes", sweepKey, sweepKey},
		{"whsec key bytes url base64", base64.RawURLEncoding.EncodeToString([]byte(sweepKey)), base64.RawURLEncoding.EncodeToString([]byte(sweepKey))},
		{"whsec key bytes hex", hex.EncodeToString([]byte(sweepKey)), hex.EncodeToString([]byte(sweepKey))},
	}
}

func assertNoPrefixLeaks(t *testing.T, detail, secret, what string) {
	t.Helper()
	if strings.Contains(detail, secret[:4]) {
		t.Fatalf("%s: a prefix of the secret survives in %q", what, detail)
	}
}

// TestSnippetRedactionHoldsAtEveryPosition sweeps every secret kind over
// every padding: the secret repeated (so masks shrink the text ahead of
// the cut), cut by the snippet size, by the read limit, and by the end of
// the body.
func TestSnippetRedactionHoldsAtEveryPosition(t *testing.T) {
	const n = 128
	secrets := secretsOf(sweepDestination("https://hooks.example.com/in"))
	for _, f := range leakForms() {
		for pad := 0; pad < 2*n; pad++ {
			for _, tail := range []int{0, 1, 3, len(f.form) / 2, len(f.form) - 1} {
				body := strings.Repeat("x", pad) + strings.Repeat(f.form+" ", 12) + f.form[:tail]
				for _, cut := range []int{len(body), pad + len(f.form)/2, pad + len(f.form) + 3} {
					if cut > len(body) {
						continue
					}
					got := readSnippet(strings.NewReader(body[:cut]), n, secrets)
					assert.LessOrEqual(t, len(got), n)
					assertNoPrefixLeaks(t, got, f.secret, fmt.Sprintf("%s pad=%d tail=%d cut=%d", f.name, pad, tail, cut))
				}
			}
		}
	}
}

// TestDetailNeverHoldsASecret sends to a recipient that answers 500 with
// every request header and the request body echoed, from a destination
// with URL user info, an Authorization header, a custom key header and a
// signing secret, over a sweep of paddings.
func TestDetailNeverHoldsASecret(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
		_ = r.Header.Write(w)
	}))
	t.Cleanup(srv.Close)
	s := newTestSender(t, Config{MaxSnippetBytes: 96})
	dest := sweepDestination(srv.URL)

	for pad := 0; pad < 200; pad += 7 {
		p := sendParams("", strings.Repeat("x", pad))
		p.Destination = dest
		res := s.Send(context.Background(), p)
		require.Equal(t, hookrelay.KindRetryable, res.Kind)
		for _, f := range leakForms() {
			assertNoPrefixLeaks(t, res.Detail, f.secret, fmt.Sprintf("%s pad=%d", f.name, pad))
		}
	}

	// The whole echo (a large snippet) shows that Go did send the Basic
	// form of the URL user info, and that it is masked.
	s = newTestSender(t, Config{MaxSnippetBytes: 4096})
	p := sendParams("", "{}")
	p.Destination = dest
	p.Destination.Headers = map[string]string{"X-Partner-Key": sweepPartner}
	res := s.Send(context.Background(), p)
	assert.Contains(t, res.Detail, "Authorization: Basic [REDACTED]")
	assert.Contains(t, res.Detail, "X-Partner-Key: [REDACTED]")
	for _, f := range leakForms() {
		assertNoPrefixLeaks(t, res.Detail, f.secret, f.name)
	}
}

// TestDetailIsRedactedWhenNoBodyWasRead: the secrets are worked out only
// when a Detail is written, and an empty response body is not read at
// all. A Classify that writes every secret form into the Detail must still
// see them masked, whether the response had no body (204, Content-Length
// 0, an empty chunked body) or one.
func TestDetailIsRedactedWhenNoBodyWasRead(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/no-content":
			w.WriteHeader(http.StatusNoContent)
		case "/length-zero":
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusOK)
		case "/chunked-empty":
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}))
	t.Cleanup(srv.Close)
	var echo strings.Builder
	for _, f := range leakForms() {
		echo.WriteString(f.form + " | ")
	}
	s := newTestSender(t, Config{Classify: func(p ClassifyParams) hookrelay.Result {
		return DefaultClassify(p).WithDetail(echo.String())
	}})
	for _, path := range []string{"/no-content", "/length-zero", "/chunked-empty", "/body"} {
		p := sendParams("", "{}")
		p.Destination = sweepDestination(srv.URL + path)
		res := s.Send(context.Background(), p)
		require.Equal(t, hookrelay.KindDelivered, res.Kind, path)
		assert.Contains(t, res.Detail, "[REDACTED]", path)
		for _, f := range leakForms() {
			assertNoPrefixLeaks(t, res.Detail, f.secret, path+": "+f.name)
		}
	}
}

// TestQueryTokenIsRedactedAsItWasSent: a recipient that echoes the request
// URI shows a query token as the URL spells it, percent-encoded or after a
// ';' that Go's query parser refuses; a framework that decodes it shows
// it decoded. Every spelling is masked.
func TestQueryTokenIsRedactedAsItWasSent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "no route for POST "+r.URL.RequestURI()+" | ")
		q, _ := url.QueryUnescape(r.URL.RawQuery)
		_, _ = io.WriteString(w, "query "+q)
	}))
	t.Cleanup(srv.Close)
	s := newTestSender(t, Config{MaxSnippetBytes: 4096})
	for _, query := range []string{
		"?token=Qt7%2Fsecret%2Bvalue%3D%3D",
		"?token=Qt7+secret+value",
		"?a=1;token=Qt7secretvalue",
		"?token=Qt7secret;value",
		"?sig=Qt7%zzsecretvalue",
	} {
		p := sendParams(srv.URL+"/in"+query, "{}")
		res := s.Send(context.Background(), p)
		require.Equal(t, hookrelay.ReasonNotFound, res.Reason, query)
		assert.Contains(t, res.Detail, "/in?", query)
		assertNoPrefixLeaks(t, res.Detail, "Qt7secret", query)
		assert.NotContains(t, res.Detail, "Qt7", query)
	}
}

// TestURLCredentialsAreRedactedAsTheURLSpellsThem: a Detail may quote the
// destination's user name or password as its URL spells them, with escapes
// that Go would write differently (lower-case hex, an escaped '~'); each
// raw spelling is masked, as are the decoded ones.
func TestURLCredentialsAreRedactedAsTheURLSpellsThem(t *testing.T) {
	const rawUser, rawPass = "Us7%2dname%7E", "Pw7%2fsecret%7Evalue"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	s := newTestSender(t, Config{Classify: func(p ClassifyParams) hookrelay.Result {
		return DefaultClassify(p).WithDetail("user " + rawUser + " password " + rawPass + " | " + "Pw7/secret~value")
	}})
	p := sendParams(strings.Replace(srv.URL, "://", "://"+rawUser+":"+rawPass+"@", 1)+"/in", "{}")
	res := s.Send(context.Background(), p)
	assert.Contains(t, res.Detail, "[REDACTED]")
	assert.NotContains(t, res.Detail, "Us7")
	assert.NotContains(t, res.Detail, "Pw7")
}
