package recipient

import (
	"errors"
	"io"
	"math"
	"net/http"
)

// defaultMaxBodyBytes is a middleware's body limit unless configured.
const defaultMaxBodyBytes = 1 << 20 // 1 MiB

// readBody reads r.Body, at most limit bytes, and reports whether it did.
// When it did not, it has answered: 413 for a body over limit or over an
// outer http.MaxBytesReader the server put around r.Body, 400 for a body
// that cannot be read.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	// One byte beyond the limit tells an oversized body; at the largest
	// limit there is no byte beyond.
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+min(1, math.MaxInt64-limit)))
	var outer *http.MaxBytesError
	switch {
	case errors.As(err, &outer) || (err == nil && int64(len(body)) > limit):
		http.Error(w, "recipient: body too large", http.StatusRequestEntityTooLarge)
		return nil, false
	case err != nil:
		http.Error(w, "recipient: cannot read body", http.StatusBadRequest)
		return nil, false
	}
	return body, true
}
