package recipient

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFormattingNeverPrintsASecret: a VerifierConfig, VerifyParams or
// Verifier printed with any verb (a config logged at start-up, a value in
// a panic or a test failure) shows neither a secret nor its key bytes.
func TestFormattingNeverPrintsASecret(t *testing.T) {
	const secret = "whsec_" + "c2VjcmV0LWtleS1ieXRlcy0wMTIzNDU2Nzg5"
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	require.NoError(t, err)
	v, err := NewVerifier(VerifierConfig{Secrets: []string{secret}})
	require.NoError(t, err)
	cfg := VerifierConfig{Secrets: []string{secret}}
	params := VerifyParams{Secrets: []string{secret}, Header: http.Header{}}
	// Every spelling fmt has for the secret or its key bytes.
	forbidden := []string{
		strings.TrimPrefix(secret, "whsec_"), string(key),
		strings.Trim(fmt.Sprint(key), "[]"), strings.Trim(fmt.Sprintf("%x", key), "[]"),
		strings.Trim(fmt.Sprintf("%#v", key)[len("[]byte{"):], "}"),
		strings.Trim(fmt.Sprintf("%#v", [][]byte{key})[len("[][]uint8{[]uint8{"):], "}"),
		fmt.Sprintf("%x", strings.TrimPrefix(secret, "whsec_")),
	}
	for _, value := range []any{cfg, &cfg, params, &params, v, *v} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			out := fmt.Sprintf(verb, value)
			for _, f := range forbidden {
				assert.NotContains(t, out, f, "%s of %T", verb, value)
			}
		}
	}
	// Nested in a caller's struct, as a logged config would be.
	type appConfig struct{ Webhooks VerifierConfig }
	assert.NotContains(t, fmt.Sprintf("%+v", appConfig{cfg}), forbidden[0])
}
