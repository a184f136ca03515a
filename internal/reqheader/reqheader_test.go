package reqheader

import "testing"

func TestUnsendable(t *testing.T) {
	for _, tt := range []struct {
		name, value string
		refused     bool
	}{
		{"Connection", "close", true},
		{"connection", "", true},
		{"KEEP-ALIVE", "timeout=5", true},
		{"Proxy-Connection", "keep-alive", true},
		{"Transfer-Encoding", "chunked", true},
		{"Upgrade", "h2c", true},
		{"TE", "gzip", true},
		{"te", "", true},
		{"Host", "internal.example", true},
		{"host", "", true},
		{"TE", "trailers", false},
		{"te", " Trailers ", false},
		{"Authorization", "Bearer t", false},
		{"X-Connection", "close", false},
		{"Content-Type", "text/plain", false},
	} {
		if got := Unsendable(tt.name, tt.value) != ""; got != tt.refused {
			t.Errorf("Unsendable(%q, %q) refuses: %v, want %v", tt.name, tt.value, got, tt.refused)
		}
	}
}
