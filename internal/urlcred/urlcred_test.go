package urlcred

import "testing"

func TestRawKeepsTheSpellingAndFindsTheAuthority(t *testing.T) {
	for _, tc := range []struct {
		in, name, password string
		ok                 bool
	}{
		{"postgres://hookrelay:s3cret-pw%40x%20y@127.0.0.1:1/test", "hookrelay", "s3cret-pw%40x%20y", true},
		{"https://Us7%2dname%7E:Pw7%2fsecret%7Evalue@h.example/in", "Us7%2dname%7E", "Pw7%2fsecret%7Evalue", true},
		{"https://user:p@ss@host/x?y=a@b", "user", "p@ss", true}, // the authority's last '@'
		{"https://host/path@x", "", "", false},                   // an '@' after the authority is no user information
		{"https://tok3n@host/", "tok3n", "", true},
		{"host=db password=x", "", "", false},
	} {
		name, password, ok := Raw(tc.in)
		if name != tc.name || password != tc.password || ok != tc.ok {
			t.Errorf("Raw(%q) = %q, %q, %v; want %q, %q, %v", tc.in, name, password, ok, tc.name, tc.password, tc.ok)
		}
	}
}
