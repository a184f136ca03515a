package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/hookrelay/hookrelay"
	"github.com/hookrelay/hookrelay/adapters/http/console"
	"github.com/hookrelay/hookrelay/adapters/memory"
)

// Mount the console under a prefix of your own mux; your authentication
// says who the operator is.
func Example() {
	ctx := context.Background()
	store := memory.NewStore() // or the SQL store
	dests := memory.NewDestinations(hookrelay.Destination{
		ID: "accounting", TenantID: "prop_mgmt_co", URL: "https://user:s3cr3t-pw@accounting.example/hooks",
	})
	client, err := hookrelay.New(hookrelay.Config{Queue: store, Ledger: store, Destinations: dests})
	if err != nil {
		panic(err)
	}
	h, err := console.New(console.Config{
		Client: client, Stats: store, Prefix: "/ops/hookrelay",
		Actor: func(r *http.Request) (string, error) {
			if u := r.Header.Get("X-Forwarded-User"); u != "" { // set by your SSO proxy
				return u, nil
			}
			return "", errors.New("not signed in")
		},
	})
	if err != nil {
		panic(err)
	}
	defer h.Close(ctx)
	mux := http.NewServeMux()
	mux.Handle("/ops/hookrelay/", http.StripPrefix("/ops/hookrelay", h))

	r := httptest.NewRequest("GET", "/ops/hookrelay/destinations", nil)
	r.Header.Set("X-Forwarded-User", "alice")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	page := w.Body.String()
	fmt.Println(w.Code, strings.Contains(page, "accounting"), strings.Contains(page, "s3cr3t-pw"))
	// Output: 200 true false
}
