package hookrelay_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hookrelay/hookrelay"
)

// TestDestinationPrintsNoSecretWithAnyVerb: a destination (or the
// SendParams carrying one) printed with any fmt verb shows its ID, never
// its URL credentials, signing secrets or header values.
func TestDestinationPrintsNoSecretWithAnyVerb(t *testing.T) {
	d := hookrelay.Destination{
		ID: "dest_acct", URL: "https://user:url-password@hooks.example/in",
		Secrets: []string{"whsec_c2lnbmluZy1zZWNyZXQtdmFsdWU="},
		Headers: map[string]string{"Authorization": "Bearer header-token"},
	}
	for _, value := range []any{d, &d, hookrelay.SendParams{Destination: d}} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d", "%t"} {
			out := fmt.Sprintf(verb, value)
			for _, secret := range []string{"url-password", "c2lnbmluZy1zZWNyZXQtdmFsdWU", "header-token"} {
				assert.NotContains(t, out, secret, "%s of %T", verb, value)
			}
		}
	}
	for _, verb := range []string{"%d", "%#v"} {
		assert.Equal(t, "destination(dest_acct)", fmt.Sprintf(verb, d), verb)
	}
}
