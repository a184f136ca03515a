package recipient_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/hookrelay/hookrelay/adapters/http/recipient"
)

// Verifying the Standard Webhooks specification's example message.
func ExampleVerify() {
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	p := recipient.VerifyParams{
		Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
		Header:  h,
		Body:    []byte(`{"test": 2432232314}`),
		Now:     time.Unix(1614265330, 0),
	}
	fmt.Println(recipient.Verify(p))

	p.Body = []byte(`{"test": 2432232315}`)
	fmt.Println(recipient.Verify(p))

	p.Now = p.Now.Add(time.Hour)
	fmt.Println(recipient.Verify(p))
	// Output:
	// <nil>
	// recipient: no signature matches an accepted secret
	// recipient: webhook-timestamp is too old
}
