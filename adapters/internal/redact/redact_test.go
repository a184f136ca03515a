package redact

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestTextMasksSecrets(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"url credentials", `Post "https://user:s3cret@hooks.example.com/in": dial tcp: refused`,
			`Post "https://[REDACTED]@hooks.example.com/in": dial tcp: refused`},
		{"url user only", "http://tok3n@example.com/", "http://[REDACTED]@example.com/"},
		// Go's url.Parse takes the last '@' of the authority: the
		// password may hold one.
		{"url password with @", `Post "https://user:p@ss@w0rd@hooks.example.com/in?x=a@b": EOF`,
			`Post "https://[REDACTED]@hooks.example.com/in?x=a@b": EOF`},
		{"authorization header", "sent Authorization: Bearer abc.def-ghi, got 401",
			"sent Authorization: [REDACTED], got 401"},
		{"api key in json", `{"x-api-key":"k-123456"}`, `{"x-api-key":"[REDACTED]"}`},
		{"bare bearer token", "token was Bearer abcdef123", "token was Bearer [REDACTED]"},
		{"apikey scheme", "sent ApiKey abcdef123 to the gateway", "sent ApiKey [REDACTED] to the gateway"},
		{"api-key scheme", "Api-Key\tabcdef123", "Api-Key\t[REDACTED]"},
		{"xml credential element", "<auth><user>u</user><password>hunter2-x</password></auth>",
			"<auth><user>u</user><password>[REDACTED]</password></auth>"},
		{"xml element with attributes", `<client_secret type="plain">s3cr3t-v</client_secret>`,
			`<client_secret type="plain">[REDACTED]</client_secret>`},
		{"xml word that is no credential", "<keyboard>qwerty</keyboard><monkeys>3</monkeys>", "<keyboard>qwerty</keyboard><monkeys>3</monkeys>"},
		{"bare digest parameters", `challenge answered with Digest username="u", realm="r", response="6629fae49393a05397450978507c4ef1", retrying`,
			`challenge answered with Digest [REDACTED], retrying`},
		{"basic credentials", "Basic dXNlcjpwYXNz rejected", "Basic [REDACTED] rejected"},
		// Any Unicode space after the scheme, and a ':' or '=' before
		// the token, as loggers and config dumps write it.
		{"bearer, no-break space", "token was Bearer\u00a0abcdef123", "token was Bearer\u00a0[REDACTED]"},
		{"bearer, em space", "Bearer\u2003abcdef123 rejected", "Bearer\u2003[REDACTED] rejected"},
		{"basic, narrow no-break space", "Basic\u202fdXNlcjpwYXNz", "Basic\u202f[REDACTED]"},
		{"bearer with a colon", "auth bearer: abcdef123, retry", "auth bearer: [REDACTED], retry"},
		{"bearer with a colon, no space", "bearer:abcdef123", "bearer:[REDACTED]"},
		{"bearer with an equals sign", "Bearer=abcdef123&x=1", "Bearer=[REDACTED]&x=1"},
		{"bearer with an equals sign, quoted", `Bearer="abcdef123"`, `Bearer="[REDACTED]"`},
		{"token with a colon is prose", "oauth2: cannot fetch token: unexpected EOF", "oauth2: cannot fetch token: unexpected EOF"},
		{"signing secret", "signed with whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw=", "signed with whsec_[REDACTED]"},
		{"query token", `Post "https://hooks.example.com/in?token=s3cretTok": EOF`,
			`Post "https://hooks.example.com/in?token=[REDACTED]": EOF`},
		{"query token at the end", "https://hooks.example.com/in?a=1&access_token=s3cretTok",
			"https://hooks.example.com/in?a=1&access_token=[REDACTED]"},
		{"query password in a dsn", "postgres://db/app?sslmode=disable&password=s3cret",
			"postgres://db/app?sslmode=disable&password=[REDACTED]"},
		{"query signature upper case", "https://bucket.example.com/o?X-Amz-Signature=abcdef0123&X-Amz-Date=1",
			"https://bucket.example.com/o?X-Amz-Signature=[REDACTED]&X-Amz-Date=1"},
		{"client secret pair", "oauth: client_secret=s3cret rejected", "oauth: client_secret=[REDACTED] rejected"},
		// The same credentials spelled as JSON members or with spaces
		// around the '='.
		{"json password", `{"error":"bad login","password":"hunter2-pw"}`, `{"error":"bad login","password":"[REDACTED]"}`},
		{"json token, spaced", `{"access_token" : "s3cretTok", "expires_in": 3600}`, `{"access_token" : "[REDACTED]", "expires_in": 3600}`},
		{"json secret, escaped quote", `{"client_secret":"s3c\"ret-tail"}`, `{"client_secret":"[REDACTED]"}`},
		{"json pretty-printed", "{\n  \"password\":\n    \"hunter22\"\n}", "{\n  \"password\":\n    \"[REDACTED]\"\n}"},
		{"json number", `{"password": 123456, "pin_code": 1}`, `{"password": [REDACTED], "pin_code": 1}`},
		{"json quoted again", `body "{\"password\":\"hunter2\\\"-tail\",\"x\":1}" refused`, `body "{\"password\":\"[REDACTED]\",\"x\":1}" refused`},
		// A header named like a credential, its name hyphenated as
		// headers are, in any case and spacing.
		{"token header", "sent X-Auth-Token: s3cretTok got 401", "sent X-Auth-Token: [REDACTED] got 401"},
		{"token header, no space", "private-token:s3cretTok", "private-token:[REDACTED]"},
		{"secret header, tab", "X-Webhook-Secret:\ts3cretVal, retry", "X-Webhook-Secret:\t[REDACTED], retry"},
		{"prose with a colon untouched", "duplicate key: order-42", "duplicate key: order-42"},
		// A name ending in "pass" is a credential when "pass" is the
		// whole name or its last part (db_pass, DB.PASS); compass, bypass
		// and passed are words.
		{"pass pair", "login pass=hunter22 user=app", "login pass=[REDACTED] user=app"},
		{"db_pass pair", "db_pass=hunter22", "db_pass=[REDACTED]"},
		{"pass query", "https://h.example.com/in?user=app&pass=hunter22&x=1", "https://h.example.com/in?user=app&pass=[REDACTED]&x=1"},
		{"pass json", `{"db_pass":"hunter22"}`, `{"db_pass":"[REDACTED]"}`},
		{"pass percent-encoded", "cb=h%3Fdb.pass%3Dhunter22%26x%3D1", "cb=h%3Fdb.pass%3D[REDACTED]%26x%3D1"},
		{"passphrase pair", "ssh passphrase=hunter22", "ssh passphrase=[REDACTED]"},
		{"words ending in pass untouched", "compass=north bypass=1 passport=X1, passed 3 tests",
			"compass=north bypass=1 passport=X1, passed 3 tests"},
		// A name ending in "key" is a credential when "key" is a word of
		// it: the whole name, its last part after a '_', '-' or '.', a
		// camelCase part (accessKey), or after a credential word run
		// together (apikey, SECRETKEY); monkey, turkey and whiskey are
		// words.
		{"words ending in key untouched", "monkey=x turkey=3 whiskey=rye hockey=1 donkey=2 JOCKEY=3 turnkey=4",
			"monkey=x turkey=3 whiskey=rye hockey=1 donkey=2 JOCKEY=3 turnkey=4"},
		{"words ending in key untouched, other spellings", `{"monkey":"x","turkey":3} <monkey>v</monkey> X-Turkey: 3 monkey%3Dx Monkey = "a b"`,
			`{"monkey":"x","turkey":3} <monkey>v</monkey> X-Turkey: 3 monkey%3Dx Monkey = "a b"`},
		// (one pair a line: an api key's value runs to the line's end)
		{"key pairs", "key=k1a\napi_key=k2b\napikey=k3c\nsecret_key=k4d\nprivate-key=k5e\nsigning.key=k6f\ndb_privatekey=k7g",
			"key=[REDACTED]\napi_key=[REDACTED]\napikey=[REDACTED]\nsecret_key=[REDACTED]\nprivate-key=[REDACTED]\nsigning.key=[REDACTED]\ndb_privatekey=[REDACTED]"},
		{"key pairs, case and camelCase", "KEY=k1a\nAPI_KEY=k2b\nApiKey=k3c\naccessKey=k4d\nSecretKey=k5e\nACCESSKEY=k6f\nprivatekey=k7g\nawsAccessKey=k8h\ns3Key=k9i",
			"KEY=[REDACTED]\nAPI_KEY=[REDACTED]\nApiKey=[REDACTED]\naccessKey=[REDACTED]\nSecretKey=[REDACTED]\nACCESSKEY=[REDACTED]\nprivatekey=[REDACTED]\nawsAccessKey=[REDACTED]\ns3Key=[REDACTED]"},
		// apikey and accesskey run together after any prefix, as in
		// "name: value" text (myapikey:), not only after a separator.
		{"apikey after any prefix", "myapikey=k1a\nawsaccesskey=k2b\n{\"stripeapikey\":\"k3c\"}",
			"myapikey=[REDACTED]\nawsaccesskey=[REDACTED]\n{\"stripeapikey\":\"[REDACTED]\"}"},
		{"key names in other forms", "{\"accessKey\":\"k1a\",\"x-api-key\":\"k2b\"} <privateKey>k3c</privateKey>\nX-Api-Key: k4d\nx-webhook-key: k5e\napiKey%3Dk6f",
			"{\"accessKey\":\"[REDACTED]\",\"x-api-key\":\"[REDACTED]\"} <privateKey>[REDACTED]</privateKey>\nX-Api-Key: [REDACTED]\nx-webhook-key: [REDACTED]\napiKey%3D[REDACTED]"},
		// A credential name with a ':' is a credential when the name is
		// a password word (pass, passwd, pwd, password, passphrase,
		// apikey, with any prefix) or compound (client_secret,
		// secret_key, private_key, access_token); a bare token:, secret:,
		// key: or auth: is prose.
		{"PASS colon", "PASS: hunter22", "PASS: [REDACTED]"},
		{"pass colon, no space", "db_pass:hunter22 host=db", "db_pass:[REDACTED] host=db"},
		{"passwd colon", "passwd: hunter22", "passwd: [REDACTED]"},
		{"pwd colon", "PWD:hunter22", "PWD:[REDACTED]"},
		{"password colon", "config: password: hunter22, user: app", "config: password: [REDACTED], user: app"},
		{"DB_PASSWORD colon", "DB_PASSWORD: hunter22", "DB_PASSWORD: [REDACTED]"},
		{"secret_key colon", "secret_key: hunter22", "secret_key: [REDACTED]"},
		{"client_secret colon", "client_secret:\thunter22", "client_secret:\t[REDACTED]"},
		{"private_key colon", "private_key: hunter22", "private_key: [REDACTED]"},
		{"access_token colon", "access_token: hunter22", "access_token: [REDACTED]"},
		{"bare credential words with a colon untouched", "invalid secret: too short; cannot fetch token: EOF; auth: denied",
			"invalid secret: too short; cannot fetch token: EOF; auth: denied"},
		{"compass colon untouched", "compass: north", "compass: north"},
		// A quoted credential value, double or single quotes, raw or
		// inside a Go quoted string, up to its closing quote (spaces and
		// escaped quotes included); Unicode spaces around the '='.
		{"quoted pair", `login password="hunter 22" user=app`, `login password="[REDACTED]" user=app`},
		{"quoted pair, escaped quote", `password="hun\"ter 22"`, `password="[REDACTED]"`},
		{"single-quoted pair", `password='hunter22'`, `password='[REDACTED]'`},
		{"quoted spaced pair", `token = "abc 123"`, `token = "[REDACTED]"`},
		{"quoted colon pair", `password: "hunter 22", user: app`, `password: "[REDACTED]", user: app`},
		{"single-quoted colon pair", `PASS: 'x y z'`, `PASS: '[REDACTED]'`},
		{"quoted header", `X-Auth-Token: "s3cret tok"`, `X-Auth-Token: "[REDACTED]"`},
		{"single-quoted header", `X-Auth-Token: 's3cretTok'`, `X-Auth-Token: '[REDACTED]'`},
		{"quoted pair in a quoted string", `args "password=\"hunter 22\" user=app" refused`, `args "password=\"[REDACTED]\" user=app" refused`},
		{"pair with no-break spaces", "password\u00a0=\u00a0hunter22", "password\u00a0=\u00a0[REDACTED]"},
		{"spaced pair", "dsn: password = s3cret user = app", "dsn: password = [REDACTED] user = app"},
		{"percent-encoded query token", "redirect_uri=https%3A%2F%2Fh.example.com%2Fcb%3Fa%3D1%26token%3Ds3cretTok%26b%3D2",
			"redirect_uri=https%3A%2F%2Fh.example.com%2Fcb%3Fa%3D1%26token%3D[REDACTED]%26b%3D2"},
		{"percent-encoded url credentials", "redirect_uri=https%3A%2F%2Fuser%3As3cret%40hooks.example.com%2Fin",
			"redirect_uri=https%3A%2F%2F[REDACTED]%40hooks.example.com%2Fin"},
		{"percent-encoded url, lower-case escapes", "cb=HTTPS%3a%2f%2fuser%3as3%40cret%40[::1]%2fin",
			"cb=HTTPS%3a%2f%2f[REDACTED]%40[::1]%2fin"},
		{"percent-encoded url, @ in the path kept", "cb=https%3A%2F%2Fhost%2Fin%3Fx%3Da%40b",
			"cb=https%3A%2F%2Fhost%2Fin%3Fx%3Da%40b"},
		{"percent-encoded signing secret", "s=whsec_MfKQ9r8G%2BKYqrTwj%2FUPD8ILPZIo2LaLaSw%3D&x=1",
			"s=whsec_[REDACTED]&x=1"},
		// A signing secret whose '_' (and base64 characters) are escaped:
		// query-escaped, escaped twice, or as JSON \u escapes (and the
		// '\/' some JSON encoders write for '/').
		{"percent-encoded signing secret prefix", "s=whsec%5FMfKQ9r8G%2BKYqrTwj%3D&x=1", "s=whsec%5F[REDACTED]&x=1"},
		{"percent-encoded signing secret prefix, lower case", "s=WHSEC%5fMfKQ9r8GKYqrTwj&x=1", "s=WHSEC%5f[REDACTED]&x=1"},
		{"twice percent-encoded signing secret", "cb=h%3Fs%3Dwhsec%255FMfKQ9r8G%252BKYq%253D%26x%3D1", "cb=h%3Fs%3Dwhsec%255F[REDACTED]%26x%3D1"},
		{"json-escaped signing secret prefix", `{"s":"whsec\u005fMfKQ9r8G\u002bKYq\/rTwj\u003d","x":1}`, `{"s":"whsec\u005f[REDACTED]","x":1}`},
		// Auth schemes with parameters (RFC 7235 auth-params): every
		// parameter is part of the credential, quoted or not.
		{"digest authorization", `sent Authorization: Digest username="u", realm="r", response="s3cretresp" got 401`,
			`sent Authorization: [REDACTED] got 401`},
		{"digest authorization, unquoted params", "Proxy-Authorization: Digest username=u, response=s3cretresp",
			"Proxy-Authorization: [REDACTED]"},
		{"aws authorization", "Authorization: AWS4-HMAC-SHA256 Credential=AKIA1/s3, SignedHeaders=host, Signature=s3cretsig",
			"Authorization: [REDACTED]"},
		{"digest authorization in a quoted string", `header "Authorization: Digest username=\"u\", response=\"s3cretresp\"" refused`,
			`header "Authorization: [REDACTED]" refused`},
		{"digest authorization in json", `{"Authorization":"Digest username=\"u\", response=\"s3cretresp\"","x":1}`,
			`{"Authorization":"[REDACTED]","x":1}`},
		// A quoted parameter holding an escaped quote (RFC 7230
		// quoted-pair), raw, in a Go quoted string and in JSON.
		{"digest authorization, escaped quote", `sent Authorization: Digest username="u", response="ab\"cd-s3cret", realm="r" got 401`,
			`sent Authorization: [REDACTED] got 401`},
		{"digest authorization, escaped quote first", `Authorization: Digest response="a\"b, s3cret\"", realm="r"` + "\nnext",
			"Authorization: [REDACTED]\nnext"},
		{"digest authorization, escaped quote in a quoted string", `header "Authorization: Digest username=\"u\", response=\"ab\\\"cd-s3cret\", realm=\"r\"" refused`,
			`header "Authorization: [REDACTED]" refused`},
		{"digest authorization, escaped quote in json", `{"Authorization":"Digest username=\"u\", response=\"ab\\\"cd, s3cret\"","x":1}`,
			`{"Authorization":"[REDACTED]","x":1}`},
		// Every cookie of a Cookie or Set-Cookie header, past the ';'.
		{"cookie header", "sent Cookie: a=1; sid=s3cretsid; b=2\r\nHost: h", "sent Cookie: [REDACTED]\r\nHost: h"},
		{"set-cookie header", "Set-Cookie: sid=s3cretsid; Path=/; HttpOnly", "Set-Cookie: [REDACTED]"},
		{"cookie in json", `{"Cookie":"a=1;sid=s3cretsid","x":1}`, `{"Cookie":"[REDACTED]","x":1}`},
		{"single-quoted authorization", `{'Authorization': 's3cretvalue'}`, `{'Authorization': '[REDACTED]'}`},
		// A Sender that cut its own detail mid-URL: the start of a
		// password at the very end, with no '@' left to find.
		{"url credentials cut before the @", `Post "https://user:s3cr`, `Post "https://[REDACTED]`},
		{"url credentials cut, marked", `dial https://user:s3cret-pa…`, `dial https://[REDACTED]`},
		{"url host and port at the end untouched", `Post "https://hooks.example.com:8443`, `Post "https://hooks.example.com:8443`},
		{"url ipv6 host at the end untouched", "refused by http://[::1]:8080", "refused by http://[::1]:8080"},
		// A PEM private key's body, to its END line or, cut, the end.
		{"pem private key", "key: -----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY----- bad",
			"key: -----BEGIN RSA PRIVATE KEY-----[REDACTED]-----END RSA PRIVATE KEY----- bad"},
		{"pem private key in json", `{"k":"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN\n-----END PRIVATE KEY-----\n"}`,
			`{"k":"-----BEGIN PRIVATE KEY-----[REDACTED]-----END PRIVATE KEY-----\n"}`},
		{"pem private key cut", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXkt", "-----BEGIN OPENSSH PRIVATE KEY-----[REDACTED]"},
		{"pem certificate untouched", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"},
		{"plain text untouched", "503 Service Unavailable: upstream busy", "503 Service Unavailable: upstream busy"},
		{"email-like text untouched", "contact ops@example.com", "contact ops@example.com"},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.in, 0); got != tt.want {
				t.Errorf("Text(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestColonPairsMaskWhatEqualsPairsMask: a name that makes a credential
// of name=value makes one of "name: value" (YAML, logs), its value quoted
// or not, however spaced: camelCase compounds (accessKey, s3Key,
// clientSecret) and words run together with "key" (SECRETKEY,
// awsaccesskey) included; a name that does not (monkey, turkey) does not.
// Only a bare credential word is prose there ("duplicate key: 42").
func TestColonPairsMaskWhatEqualsPairsMask(t *testing.T) {
	bare := map[string]bool{"key": true, "KEY": true, "Key": true, "token": true, "secret": true, "auth": true, "sig": true}
	for _, name := range []string{
		"key", "KEY", "Key", "api_key", "x-api-key", "apikey", "myapikey", "ApiKey", "accessKey", "AccessKey", "awsAccessKey",
		"awsaccesskey", "ACCESSKEY", "s3Key", "signingKey", "secretKey", "SECRETKEY", "privatekey", "db_privatekey",
		"signing.key", "monKey", "accessKEY", "accessToken", "clientSecret", "basicAuth", "userCredentials", "requestSig",
		"apiSignature", "token", "secret", "auth", "sig", "access_token",
		"monkey", "turkey", "whiskey", "Monkey", "JOCKEY", "turnkey", "keyboard", "hockey_key_count",
	} {
		masked := Text(name+"=v4lue", 0) == name+"="+Mask
		for _, pair := range []string{name + ": v4lue", name + ":v4lue", name + " : v4lue", name + ": \"v4 lue\"", name + ":\t'v4lue'"} {
			got := Text(pair, 0)
			if want := masked && !bare[name]; strings.Contains(got, "v4") == want {
				t.Errorf("%q gives %q; %q masked: %v", pair, got, name+"=v4lue", masked)
			}
		}
	}
}

func TestTextCutsOnARuneBoundary(t *testing.T) {
	in := strings.Repeat("é", 10) // 20 bytes
	got := Text(in, 5)
	if got != "éé…" {
		t.Errorf("Text(%q, 5) = %q, want %q", in, got, "éé…")
	}
	if got := Text(strings.Repeat("a", 300), 0); len(got) != DefaultMax+len("…") {
		t.Errorf("default cut: %d bytes, want %d", len(got), DefaultMax+len("…"))
	}
}

// TestTextRedactsBeforeItCuts sweeps every secret kind the rules know over
// every padding and cut: no 4-byte prefix of a secret survives, wherever
// the cut falls and however much the masks shrink the text ahead of it.
func TestTextRedactsBeforeItCuts(t *testing.T) {
	const tok = "Qz7tok-0123456789abcdefghijklmnopqrstu"
	forms := []struct{ form, secret string }{
		{"Authorization: Bearer " + tok, tok},
		{"Proxy-Authorization: " + tok, tok},
		{`{"x-api-key":"` + tok + `"}`, tok},
		{"Bearer " + tok, tok},
		{"ApiKey " + tok, tok},
		{"<password>" + tok + "</password>", tok},
		{`Digest username="u", response="` + tok + `"`, tok},
		{"Bearer\u00a0" + tok, tok},
		{"bearer: " + tok, tok},
		{"Bearer=" + tok, tok},
		{"https://hooks.example.com/in?token=" + tok, tok},
		{"'Authorization': '" + tok + "'", tok},
		{"X-Auth-Token: " + tok, tok},
		{"db_pass=" + tok, tok},
		{"PASS: " + tok, tok},
		{"client_secret: " + tok, tok},
		{"Cookie: a=1; sid=" + tok, tok},
		{"-----BEGIN EC PRIVATE KEY-----\n" + tok + "\n-----END EC PRIVATE KEY-----", tok},
		{"{\"access_token\":\r\n\t\"" + tok + "\"}", tok},
		{`password="a b` + tok + `"`, tok},
		{`X-Auth-Token: 'a b` + tok + `'`, tok},
		{`PASS: "a b` + tok + `"`, tok},
		{"cb=https%3A%2F%2Fh%2Fin%3Ftoken%3D" + tok, tok},
		{`{"access_token": "` + tok + `"}`, tok},
		{`Authorization: Digest username="u", response="` + tok + `"`, tok},
		{`Authorization: Digest username="u", response="a\"b` + tok + `"`, tok},
		{`{"Authorization":"Digest username=\"u\", response=\"a\\\"b` + tok + `\""}`, tok},
		{"cb=https%3A%2F%2FUs3rname%3APw4pass-zyxwvutsrqponm%40hooks.example.com", "Pw4pass-zyxwvutsrqponm"},
		{"whsec_S3k1LXNp%2BZ25pbmcta2V5LWJ5dGVz%2FLTAxMjM0NTY3ODk%3D", "ZW5pbmcta2V5LWJ5dGVz"},
		{"Basic VXMzcm5hbWU6UHc0cGFzcy16eXh3dnV0c3JxcG9ubQ==", "VXMzcm5hbWU6UHc0cGFzcy16eXh3dnV0c3JxcG9ubQ=="},
		{"https://Us3rname:Pw4pass-zyxwvutsrqponm@hooks.example.com/in", "Pw4pass-zyxwvutsrqponm"},
		{"whsec_S3k1LXNpZ25pbmcta2V5LWJ5dGVzLTAxMjM0NTY3ODk=", "S3k1LXNpZ25pbmcta2V5LWJ5dGVzLTAxMjM0NTY3ODk="},
		{"whsec%5FS3k1LXNp%2BZ25pbmcta2V5LWJ5dGVz%2FLTAxMjM0NTY3ODk%3D", "S3k1LXNp"},
		{"whsec%255FS3k1LXNp%252BZ25pbmcta2V5LWJ5dGVz", "S3k1LXNp"},
		{`whsec\u005fS3k1LXNp\u002bZ25pbmcta2V5LWJ5dGVz\/LTAxMjM0NTY3ODk=`, "S3k1LXNp"},
	}
	for _, f := range forms {
		for pad := 0; pad < 130; pad++ { // every alignment of a secret with each cut
			in := strings.Repeat(" ", pad) + strings.Repeat(f.form+" ", 6)
			for _, max := range []int{32, 64, 100} {
				got := Text(in, max)
				if strings.Contains(got, f.secret[:4]) {
					t.Fatalf("Text(pad %d, max %d) of %q leaks a prefix: %q", pad, max, f.form, got)
				}
			}
		}
	}
}

// TestTextMasksURLCredentialsCutBeforeTheirEnd cuts a URL at every byte
// of its password, as a Sender that bounds its own detail may: no
// 4-byte prefix of the password survives.
func TestTextMasksURLCredentialsCutBeforeTheirEnd(t *testing.T) {
	const pass = "Pw4pass-zyxwvutsrqponm"
	url := `Post "https://Us3rname:` + pass + `@hooks.example.com/in": EOF`
	start := strings.Index(url, pass)
	for end := start + 4; end <= start+len(pass); end++ {
		for _, mark := range []string{"", "…", "..."} {
			if got := Text(url[:end]+mark, 0); strings.Contains(got, pass[:4]) {
				t.Fatalf("Text(%q) leaks a prefix: %q", url[:end]+mark, got)
			}
		}
	}
}

// needsCorpus holds a text of every kind each rule masks, in the
// spellings a case-insensitive expression matches: ASCII case, and the
// two runes outside ASCII that fold to an ASCII letter (K KELVIN SIGN, ſ
// LONG S).
var needsCorpus = []string{
	"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
	"https://user:pw@host/x", "https://user:pw", "cb=https%3A%2F%2Fu%3Ap%40h",
	`password="a b"`, `PaſſWORD='a b'`, "db_pass=x1234", "DB.PASS=x1234", "tO\u212Aen=abcd", "api\u212Aey=abcd",
	"token%3Dabcd", "PASS: abcd", "client_secret: abcd", "Private-Token: abcd", "X-Auth-Token: abcd",
	`{"password":"abcd"}`, `{"pwd": 123456}`, `{\"access_token\":\"abcd\"}`, "sig=abcd", "X-Amz-Signature=abcd",
	"Cookie: a=1; sid=abcd", "Set-Cookie: sid=abcd", "Authorization: Digest username=\"u\", response=\"abcd\"",
	"proxy-authorization: Basic abcd", "x-api-key: abcd", "API_KEY=abcd", "Bearer abcdef", "baſic abcdef",
	"to\u212Aen abcdef", "bearer: abcdef", "BEARER=abcdef", "whsec_abcd", "WHSEC%5Fabcd", `whsec\u005fabcd`,
	"credentials=abcd", "passphrase: abcd", "secret_key: abcd",
	"ApiKey abcdef", "api-\u212Aey abcdef", "<password>abcd</password>", "<PaſſWORD>abcd</PaſſWORD>",
	`Digest username="u", response="abcd"`, `DIGEST response=abcd`,
	"accessKey=abcd", `{"s3Key":"abcd"}`, "<signingkey>abcd</signingkey>", "monkey=abcd",
}

// TestRulesRunWhereverTheyCanMatch: Text skips a rule on text that holds
// none of its needs, so every text a rule matches must hold one of them
// (folded); a need missing a spelling would let that spelling through.
func TestRulesRunWhereverTheyCanMatch(t *testing.T) {
	matched := make([]bool, len(rules))
	for _, s := range needsCorpus {
		for i, r := range rules {
			if !r.re.MatchString(s) {
				continue
			}
			matched[i] = true
			if !holdsAny(fold(s), r.needs) {
				t.Errorf("rule %d (%s) matches %q, which holds none of its needs %q", i, r.re, s, r.needs)
			}
		}
	}
	for i, m := range matched {
		if !m {
			t.Errorf("rule %d (%s) matches nothing in the corpus: add a text of its kind", i, rules[i].re)
		}
	}
}

// FuzzTextAsIfEveryRuleRan: skipping rules by their needs changes no
// output.
func FuzzTextAsIfEveryRuleRan(f *testing.F) {
	for _, s := range needsCorpus {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := s
		for _, r := range rules {
			want = r.re.ReplaceAllString(want, r.with)
		}
		if got := Text(s, 1<<20); got != Cut(want, 1<<20) {
			t.Fatalf("Text(%q) = %q, every rule gives %q", s, got, Cut(want, 1<<20))
		}
	})
}

// BenchmarkText: a reason (what the OpenTelemetry observer masks on every
// attempt), a 1 KiB JSON error body without credentials (a snippet), and
// the same body holding one.
func BenchmarkText(b *testing.B) {
	body := strings.Repeat(`{"error":"upstream timeout","request_id":"abc-123","retry":true} `, 16)
	for _, tc := range []struct{ name, in string }{
		{"reason", "server_error"},
		{"detail", body},
		{"detail_with_credential", body + `{"access_token":"abcdef0123456789"}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				_ = Text(tc.in, DefaultMax)
			}
		})
	}
}

// holdsAny reports whether s contains one of subs.
func holdsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestFieldMasksACredentialNameWholeAndOtherValuesAsText(t *testing.T) {
	for name, want := range map[string]string{
		"api_key": Mask, "X-Auth-Token": Mask, "PASSWORD": Mask, "db_pass": Mask, "client_secret": Mask,
		"compass": "north", "property": "north", "passport": "north",
	} {
		if got := Field(name, "north", 0); got != want {
			t.Errorf("Field(%q) = %q, want %q", name, got, want)
		}
	}
	if got := Field("api_key", "", 0); got != "" {
		t.Errorf("an empty value is %q, want it empty", got)
	}
	if got := Field("callback", "https://u:secret99@h.invalid/", 0); strings.Contains(got, "secret99") {
		t.Errorf("a value's URL credentials are kept: %q", got)
	}
}

// TestFieldNamesWhatPairsName: a field name is a credential's exactly
// when it makes one of a name=value pair, camelCase (s3Key, monKey) and
// folding runes (KELVIN SIGN, long s) included.
func TestFieldNamesWhatPairsName(t *testing.T) {
	for _, name := range []string{
		"api_key", "accessKey", "s3Key", "monKey", "signingKey", "SECRETKEY", "ACCESSKEY", "api\u212Aey", "to\u212Aen",
		"Pa\u017f\u017fWORD", "X-Auth-Token", "monkey", "Monkey", "turkey", "compass",
	} {
		want := Text(name+"=v4lue", 0) == name+"="+Mask
		if got := Field(name, "v4lue", 0) == Mask; got != want {
			t.Errorf("Field(%q) masked: %v; %q masked: %v", name, got, name+"=v4lue", want)
		}
	}
}

// TestNamedRulesReplaceWhatTheirExpressionReplaces: a named rule, tried
// only where its needs are, replaces exactly what its expression replaces
// over the whole text, on texts strung together from the pieces its
// matches are made of and the edges between them (name characters on
// either side of a need, quotes, escaped quotes, '<', word boundaries,
// folding runes, long runs) — and so does Text, as if every rule ran.
func TestNamedRulesReplaceWhatTheirExpressionReplaces(t *testing.T) {
	pieces := []string{
		"token", "secret", "pass", "password", "pwd", "sig", "key", "Key", "KEY", "auth", "credential", "credentials",
		"Token", "Secret", "Sig", "Auth", "Credentials", "private",
		"api", "access", "monkey", "myapikey", "s3", "x", "X-", "-", "_", ".", "a", "Z", "9",
		"=", " = ", ":", ": ", "%3D", "%26", "&", "?", "#", ";", ",", "\"", "'", "\\\"", "\\\\", "\\", "<", ">", "</", "/>",
		" ", "\t", "\n", "\u00a0", "\u212a", "\u017f", "{", "}", "[", "]", "0123", "abc def", "whsec_", "Bearer ", "bearer", "basic", "Basic ", "digest ", "Digest", "cookie", "set-",
		"Cookie: ", "authorization", "Proxy-", "api-key", "api_key", "x-", " a=b", "realm=\"x\"", ", ",
		strings.Repeat("n", 70),
	}
	rng := rand.New(rand.NewPCG(7, 11))
	var namedRules []rule
	for _, r := range rules {
		if r.named != nil {
			namedRules = append(namedRules, r)
		}
	}
	if len(namedRules) == 0 {
		t.Fatal("no named rule")
	}
	for i := range 6000 {
		var b strings.Builder
		for range 1 + rng.IntN(14) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		for _, r := range namedRules {
			want := r.re.ReplaceAllString(s, r.with)
			if got := r.named.replace(r.re, s, newNeedPlaces(s).of(r.needs), r.with); got != want {
				t.Fatalf("text %d %q, rule %s: tried where its needs are %q, over the whole text %q", i, s, r.re, got, want)
			}
		}
		want := s
		for _, r := range rules {
			want = r.re.ReplaceAllString(want, r.with)
		}
		if got := Text(s, 1<<20); got != Cut(want, 1<<20) {
			t.Fatalf("Text(%q) = %q, every rule gives %q", s, got, Cut(want, 1<<20))
		}
	}
}
