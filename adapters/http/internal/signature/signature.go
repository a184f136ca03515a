// Package signature implements the Standard Webhooks signature scheme that
// the HTTP sender and the recipient kit share: secrets in the "whsec_" form,
// "v1," signatures that are the base64 HMAC-SHA256 of "id.timestamp.body",
// and the space-separated webhook-signature header.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"hash"
	"strconv"
	"strings"
	"sync"
)

// SecretPrefix starts every Standard Webhooks secret; the base64 HMAC key
// follows it.
const SecretPrefix = "whsec_"

// ErrInvalidSecret reports a secret whose key is not valid base64 or is
// empty. It never carries the secret itself.
var ErrInvalidSecret = errors.New("signing secret is not a valid whsec_ base64 key")

// InvalidSecretError is DecodeSecret's error. Reason says what is wrong
// with the secret without quoting any of it; it unwraps to
// ErrInvalidSecret.
type InvalidSecretError struct{ Reason string }

func (e *InvalidSecretError) Error() string { return ErrInvalidSecret.Error() + ": " + e.Reason }

func (e *InvalidSecretError) Unwrap() error { return ErrInvalidSecret }

// DecodeSecret returns the HMAC key of a secret. The "whsec_" prefix is
// optional, as in the reference implementations; the rest must be standard
// padded base64 (which, as there, may hold line breaks, so a secret read
// from a file with its trailing newline decodes). Anything else is an
// *InvalidSecretError saying what is wrong: an empty key, surrounding
// spaces or tabs, an upper-case prefix, the URL-safe alphabet or missing
// padding.
func DecodeSecret(secret string) ([]byte, error) {
	body := strings.TrimPrefix(secret, SecretPrefix)
	key, err := base64.StdEncoding.DecodeString(body)
	if err != nil || len(key) == 0 {
		return nil, &InvalidSecretError{Reason: secretProblem(secret, body)}
	}
	return key, nil
}

// secretProblem says why a secret whose base64 part is body does not
// decode to a key, in words that quote none of it.
func secretProblem(secret, body string) string {
	lines := strings.NewReplacer("\r", "", "\n", "")
	switch {
	case strings.TrimSpace(secret) == "":
		return "it is empty"
	case strings.TrimSpace(body) == "":
		return "the key after the whsec_ prefix is empty"
	case strings.TrimSpace(secret) != secret:
		return "it has leading or trailing whitespace"
	case !strings.HasPrefix(secret, SecretPrefix) && len(secret) > len(SecretPrefix) &&
		strings.EqualFold(secret[:len(SecretPrefix)], SecretPrefix):
		return "its prefix must be lower-case whsec_"
	case strings.ContainsAny(body, "-_"):
		return "it uses the URL-safe base64 alphabet (- and _); the key must be standard base64 (+ and /)"
	}
	if _, err := base64.RawStdEncoding.DecodeString(lines.Replace(body)); err == nil {
		return "its base64 lacks the = padding"
	}
	return "the key is not standard base64"
}

// mac returns the HMAC-SHA256 of "id.timestamp.body" under key.
func mac(key []byte, id string, timestamp int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write(strconv.AppendInt(nil, timestamp, 10))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Sign returns one "v1,<base64>" signature of the message under key.
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, timestamp, body))
}

// Header returns the webhook-signature header value: one signature per key,
// space-separated, in key order.
func Header(keys [][]byte, id string, timestamp int64, body []byte) string {
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = Sign(k, id, timestamp, body)
	}
	return strings.Join(sigs, " ")
}

// Key is a decoded HMAC key that keeps keyed HMAC states for reuse, so a
// signature does not key a new HMAC (two hash blocks and several
// allocations) each time. A Key is safe for concurrent use.
type Key struct {
	macs sync.Pool // of hash.Hash keyed with the key
}

// NewKey returns a Key for a decoded key; the key bytes must not be
// modified afterwards.
func NewKey(key []byte) *Key {
	k := new(Key)
	k.macs.New = func() any { return hmac.New(sha256.New, key) }
	return k
}

// HeaderOf returns what Header returns for the same keys. It builds the
// header in one string, with one scratch buffer for the signed prefix
// "id.timestamp.", the MAC and its base64.
func HeaderOf(keys []*Key, id string, timestamp int64, body []byte) string {
	if len(keys) == 0 {
		return ""
	}
	buf := make([]byte, 0, len(id)+2+20+sha256.Size+encodedMACLen) // 20: the longest int64
	buf = append(buf, id...)
	buf = append(buf, '.')
	buf = strconv.AppendInt(buf, timestamp, 10)
	buf = append(buf, '.')
	prefix := buf
	var out strings.Builder
	out.Grow(len(keys)*(len("v1,")+encodedMACLen+1) - 1)
	for i, k := range keys {
		h := k.macs.Get().(hash.Hash)
		h.Reset()
		h.Write(prefix)
		h.Write(body)
		sum := h.Sum(prefix[len(prefix):len(prefix)])
		k.macs.Put(h)
		enc := base64.StdEncoding.AppendEncode(sum[len(sum):len(sum)], sum)
		if i > 0 {
			out.WriteByte(' ')
		}
		out.WriteString("v1,")
		out.Write(enc)
	}
	return out.String()
}

// Signature is one entry of a webhook-signature header.
type Signature struct {
	// Version is the scheme, "v1" for HMAC-SHA256.
	Version string
	// Value is the base64 signature as sent.
	Value string
}

// Parse splits a webhook-signature header into its entries and reports
// whether there are at most max of them. Entries are separated by white
// space; each is "version,value". Entries without a comma or with an empty
// version or value are skipped, but they count towards max. A header with
// more than max entries yields nil and false, having been read only up to
// its entry max+1, so its length does not bound the work.
func Parse(header string, max int) ([]Signature, bool) {
	var out []Signature
	n := 0
	for f := range strings.FieldsSeq(header) {
		if n++; n > max {
			return nil, false
		}
		version, value, ok := strings.Cut(f, ",")
		if !ok || version == "" || value == "" {
			continue
		}
		out = append(out, Signature{Version: version, Value: value})
	}
	return out, true
}

// encodedMACLen is the length of a v1 value: the padded base64 of a
// SHA-256 MAC.
var encodedMACLen = base64.StdEncoding.EncodedLen(sha256.Size)

// Match reports whether any v1 entry of sigs is the signature of the
// message under any of keys. As in the reference libraries (Go and
// JavaScript), the value is compared as sent with the padded base64 of
// each key's MAC, in constant time (hmac.Equal): nothing the sender wrote
// is decoded, a value of another length than 44 characters is passed over
// at once, and a value with its unused trailing bits set, which lenient
// decoding would take for the genuine MAC, is not the string the sender
// computed and does not match.
func Match(keys [][]byte, id string, timestamp int64, body []byte, sigs []Signature) bool {
	want := make([][]byte, len(keys))
	for i, k := range keys {
		want[i] = base64.StdEncoding.AppendEncode(make([]byte, 0, encodedMACLen), mac(k, id, timestamp, body))
	}
	found := false
	var buf [64]byte // holds a value of encodedMACLen without allocating
	for _, s := range sigs {
		if s.Version != "v1" || len(s.Value) != encodedMACLen {
			continue
		}
		got := append(buf[:0], s.Value...)
		for _, w := range want {
			if hmac.Equal(got, w) {
				found = true
			}
		}
	}
	return found
}
