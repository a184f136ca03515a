// Package redact makes diagnostic text safe to log or attach to a span.
// Result.Detail and worker errors are secret-free by contract; this is the
// second line of defence for a Sender that breaks it: URL credentials
// (user information, and query or key=value pairs named like token,
// password, secret, key or signature, raw or percent-encoded), JSON members,
// XML elements and headers named like them, Authorization values (with a
// scheme's parameters, and Digest's parameters quoted without the header
// name), tokens after an auth scheme (Bearer, Basic, Token, ApiKey), Standard Webhooks secrets (raw, percent-encoded once or
// twice, or JSON-escaped) and PEM private keys are masked, and the text
// is cut to a bounded length.
//
// Which names are credentials: in name=value pairs, query pairs and JSON
// members, a name that ends in token, secret, password, passwd,
// passphrase, pwd, sig, signature, auth or credential(s) (access_token,
// client_secret, X-Amz-Signature), whose last part is "pass" (pass,
// db_pass, DB.PASS: not compass or bypass), or whose last word is "key"
// (key, api_key, x-api-key, signing.key, accessKey, apikey, SECRETKEY:
// not monkey or turkey). In "name: value" text, where a
// bare word is often prose ("cannot fetch token: EOF", "duplicate key: 42"),
// only a password word with any prefix (PASS:, passwd:, pwd:,
// DB_PASSWORD:, apikey:) or a compound name (client_secret:,
// private_key:, access_token:, accessKey:, clientSecret:, SECRETKEY:;
// every name ending in "key" that name=value takes but the bare word);
// hyphenated header names (X-Auth-Token:, X-Api-Key:) always. Ordinary words that merely contain one (passed,
// passport, compass) are left alone. A value in quotes is masked up to its
// closing quote, spaces and escaped quotes included.
package redact

import (
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Mask replaces a secret.
const Mask = "[REDACTED]"

// DefaultMax is the length Text cuts to when max is not positive.
const DefaultMax = 256

// credentialName is the key of a credential pair: one that ends like
// access_token, client_secret, password, X-Amz-Signature…, or whose last
// part is "pass" (pass, db_pass, DB.PASS, not compass or bypass) or "key"
// (key, api_key, private-key, signing.key), or ends in a camelCase "Key"
// (accessKey, s3Key: a lower-case letter or digit, then an upper-case K,
// matched case-sensitively), or whose last part is "key" run together
// after one of keyPrefixes (apikey, SECRETKEY, db_privatekey), or that
// ends in apikey or accesskey (myapikey, awsaccesskey). Words that merely
// end in "key" (monkey, turkey, whiskey, hockey) are not.
// (The prefixes follow a separator, not any run of letters: after any,
// the alternation of prefixes made masking several times slower.)
const credentialName = `(?:[a-z0-9_.-]*(?:token|secret|password|passwd|passphrase|pwd|sig|signature|auth|credentials?|apikey|accesskey|(?-i:[a-z0-9]K)ey)|(?:[a-z0-9_.-]*[_.-])?(?:pass|` + keyPrefixes + `?key))`

// keyPrefixes are the words that make a credential name when "key"
// follows them with no separator, in any case.
const keyPrefixes = `(?:api|access|secret|private|signing|sign|hmac|master|client|auth|session|encryption|license|licence|app|shared|consumer|subscription|account|storage|webhook|ssh|pass)`

// colonCredentialName is the name of a "name: value" credential, where
// bare words are prose ("cannot fetch token: EOF", "duplicate key: 42"):
// a password word with any prefix (pass as the last part, as above), or
// a compound name ending in a credential word, after a separator
// (client_secret, secret_key, private_key, access_token) or as a camelCase
// part (accessKey, s3Key, clientSecret, accessToken), or "key" run
// together as in credentialName (SECRETKEY, db_privatekey, awsaccesskey):
// every name ending in "key" that credentialName takes but the bare word.
const colonCredentialName = `(?:[a-z0-9_.-]*(?:password|passwd|passphrase|pwd|apikey|accesskey|` + camelCredentialWord + `)|` +
	`(?:[a-z0-9_.-]*[_.-])?(?:pass|` + keyPrefixes + `key)|[a-z0-9_.-]*[_.-](?:token|secret|key|credentials?|signature|sig|auth))`

// camelCredentialWord is a credential word that is a camelCase part of a
// name: a lower-case letter or digit, then the word with its first letter
// upper-case (matched case-sensitively, as in credentialName's "Key").
const camelCredentialWord = `(?-i:[a-z0-9]T)oken|(?-i:[a-z0-9]S)ecret|(?-i:[a-z0-9]K)ey|(?-i:[a-z0-9]C)redentials?|(?-i:[a-z0-9]S)ig(?:nature)?|(?-i:[a-z0-9]A)uth`

// space is one space of any kind: ASCII white space, a Unicode space
// separator (no-break, em, narrow no-break…), NEL, and the zero-width
// space and no-break space.
const space = `[\s\p{Z}\x{85}\x{200B}\x{FEFF}]`

// quotedString is an RFC 7230 quoted-string, a '\"' inside it escaped
// ("a\"b"), or the same inside a quoted string (\"a\\\"b\"), up to its
// closing quote or the end of the line.
const quotedString = `(?:"(?:[^"\\\r\n]|\\[^\r\n])*"?|\\"(?:[^"\\\r\n]|\\[^"\\\r\n]|\\\\(?:\\["\\]|[^"\\\r\n]))*(?:\\")?)`

// headerCredentialName is a header named like a credential, hyphenated as
// header names are: X-Auth-Token, Private-Token, X-Webhook-Secret.
const headerCredentialName = `[a-z0-9]+(?:-[a-z0-9]+)*-` + credentialName

// sep is the blank around a pair's '=' or ':': spaces, tabs and Unicode
// spaces (no-break…), not a line break.
const sep = `[ \t\p{Zs}]*`

// authParam is one RFC 7235 auth-param: token=token or token="quoted".
const authParam = `[A-Za-z0-9!#$%&*+.^_|~-]+[ \t]*=[ \t]*(?:` + quotedString + `|[^\s,;"'}]*)`

// quotedValueName is what comes before a quoted credential value.
const quotedValueName = `(?:` + credentialName + sep + `=|(?:` + colonCredentialName + `|` + headerCredentialName + `)` + sep + `:)` + sep

// unquotedValue is a value of characters not in the class end (which
// holds the quotes) that does not start with an escaped quote either: that
// opens a value inside a quoted string, masked whole by the quoted-value
// rules.
func unquotedValue(end string) string {
	return `(?:[^` + end + `\\]|\\[^"])[^` + end + `]*`
}

// credentialWords are the words of which every credential name
// (credentialName, colonCredentialName, headerCredentialName) holds one:
// password, passwd and passphrase hold "pass", signature "sig", apikey
// "key", credentials "credential".
var credentialWords = []string{"token", "secret", "pass", "pwd", "sig", "key", "auth", "credential"}

// rule is a mask: re's matches are replaced by with, on text holding one
// of needs (see rules).
type rule struct {
	needs []string
	re    *regexp.Regexp
	with  string
	// named, when set, is re's other form, used by namedRule.replace:
	// re's matches are found without running re over the whole text.
	named *namedRule
}

// rules are the masks, in order. A rule runs only on text holding one of
// its needs, in folded form (see fold): strings every text it matches
// holds. Masking is the whole cost of Text, and most diagnostics hold none
// of them ("server_error", a JSON error body), so this makes the common
// case a scan for a few words instead of a regular expression per rule
// (a 1 KiB detail took milliseconds). A mask inserted by one rule holds no
// need of another ("[REDACTED]" between brackets), so the needs found in
// the text as given stand for the text each rule sees.
var rules = []rule{
	// A PEM private key (PKCS #1 and #8, EC, OpenSSH, PGP): its body, up
	// to its END line or, when the text was cut inside it, the end
	{[]string{"private key"}, regexp.MustCompile(`(-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)(?s:.*?)(-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)`), "${1}" + Mask + "${2}", nil},
	// scheme://user:password@host → scheme://[REDACTED]@host, up to the
	// authority's last '@' as Go's url.Parse reads it (a password may
	// hold one)
	{[]string{"://"}, regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#\s]+@`), "${1}" + Mask + "@", nil},
	// A URL whose text was cut (by whoever wrote it) inside its user
	// information, before the '@': at the very end of the text,
	// scheme://user:pass, where what follows the ':' is no port (it holds
	// a letter); a trailing "…" or "..." is the cut's mark
	{[]string{"://"}, regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[A-Za-z0-9._~!$&'()*+,;=%-]*:[A-Za-z0-9._~!$&'()*+,;=%:-]*[A-Za-z_~%-][A-Za-z0-9._~!$&'()*+,;=%:-]*(?:…|\.\.\.)?$`), "${1}" + Mask, nil},
	// The same URL percent-encoded (a URL inside a query value):
	// scheme%3A%2F%2Fuser%3Apassword%40host, up to the authority's last
	// %40; the authority ends at a raw or encoded '/', '?' or '#'
	{[]string{"%3a%2f%2f"}, regexp.MustCompile(`(?i)([a-z][a-z0-9+.-]*%3A%2F%2F)(?:[^/?#&%\s"'<>]|%(?:[014-9a-f][0-9a-f]|2[0-24-9a-e]|3[0-9a-e]))+%40`), "${1}" + Mask + "%40", nil},
	// A quoted credential value after a name=, a name: (see
	// colonCredentialName) or a credential header's name: password="…",
	// token = '…', PASS: "…", X-Auth-Token: "…", and password=\"…\" inside
	// a quoted string, up to its closing quote (spaces and escaped quotes
	// included) or the end of the line
	// (one expression, the quote kinds as alternatives: an unmatched
	// group expands to nothing)
	named(credentialWords, 0, `(`+quotedValueName+`)(?:(")(?:[^"\\\r\n]|\\[^\r\n])*|(')[^'\r\n]*|`+
		`(\\")(?:[^"\\\r\n]|\\[^"\\\r\n]|\\\\(?:\\["\\]|[^"\\\r\n]))*)`, "${1}${2}${3}${4}"+Mask),
	// A credential as a query or key=value pair: ?token=…, &access_token=…,
	// password=…, password = …, client_secret=…, X-Amz-Signature=…, up to
	// the pair's end (a value that starts with a quote is masked above)
	named(credentialWords, 0, `(`+credentialName+sep+`=`+sep+`)`+unquotedValue(`&#\s"'<>;,`), "${1}"+Mask),
	// The same pair percent-encoded (a URL inside a query value):
	// token%3D…, up to an encoded or raw '&' or '#'
	named(credentialWords, 0, `(`+credentialName+`%3D)(?:[^&#\s"'<>;,%]|%(?:[013-9a-f][0-9a-f]|2[0-24-57-9a-f]))+`, "${1}"+Mask),
	// name: value, with a name that is no prose (see colonCredentialName):
	// PASS: …, db_pass:…, client_secret: …, up to white space or a
	// separator
	named(credentialWords, 0, `(`+colonCredentialName+sep+`:`+sep+`)`+unquotedValue(`\s,;"'<>}`), "${1}"+Mask),
	// The same as a JSON member, "password": "…", up to its closing quote,
	// pretty-printed or not, or a number ("password": 123456)
	named(credentialWords, '"', `("`+credentialName+`"\s*:\s*")(?:[^"\\\r\n]|\\.)*`, "${1}"+Mask),
	named(credentialWords, '"', `("`+credentialName+`"\s*:\s*)-?[0-9][0-9.eE+-]*`, "${1}"+Mask),
	// and as JSON quoted again (\"password\": \"…\", in a Go %q string),
	// where an escape inside the value is a doubled backslash and more
	named(credentialWords, '\\', `(\\"`+credentialName+`\\"[ \t]*:[ \t]*\\")(?:[^"\\\r\n]|\\\\(?:\\["\\]|[^"\\]))*`, "${1}"+Mask),
	// A header named like a credential, hyphenated as header names are:
	// X-Auth-Token: …, Private-Token: …, X-Webhook-Secret: …
	named(credentialWords, 0, `(`+headerCredentialName+sep+`:`+sep+`)`+unquotedValue(`\s,;"'}`), "${1}"+Mask),
	// Authorization: <anything up to the end of the header value>, and
	// the parameters of a scheme that takes them (RFC 7235 auth-params,
	// token=token or token="quoted", comma-separated: Digest username="u",
	// response="…"), raw or inside a quoted string (JSON, Go's %q)
	// Cookie and Set-Cookie: every cookie, past the ';', to the end of the
	// header value
	named([]string{"cookie"}, 0, `((?:set-)?cookie)(["']?\s*[:=]\s*["']?)[^\r\n"'}]+`, "${1}${2}"+Mask),
	named([]string{"auth", "key"}, 0, `((?:proxy-)?authorization|x-api-key|api[-_]?key)(["']?\s*[:=]\s*["']?)`+
		`(?:=[ \t]*`+quotedString+`|[^\r\n,;"'}])+`+
		`(?:[ \t]*,[ \t]*[A-Za-z0-9!#$%&*+.^_|~-]+[ \t]*=[ \t]*(?:`+quotedString+`|[^\r\n,;"'}]*))*`, "${1}${2}"+Mask),
	// A credential after an auth scheme: "Bearer abc", "Basic dXNlcg==",
	// the scheme followed by any Unicode space (a no-break space…), and
	// "bearer: abc", "Bearer=abc", "Bearer=\"abc\"" as loggers and config
	// dumps write it
	// ("token: expired" is prose: only "bearer" takes a ':')
	// (and "ApiKey abc", "Api-Key abc", a gateway's scheme)
	named([]string{"bearer", "basic", "token", "key"}, 0, `(bearer|basic|token|api[-_]?key)(`+space+`+)[A-Za-z0-9._~+/=-]{4,}`, "${1}${2}"+Mask),
	// Digest's parameters where no Authorization name comes before them
	// (a challenge or an answer quoted in prose): Digest username="u",
	// response="…" → Digest [REDACTED], every name=value of the list
	named([]string{"digest"}, 0, `(digest)(`+space+`+)`+authParam+`(?:[ \t]*,[ \t]*`+authParam+`)*`, "${1}${2}"+Mask),
	// An XML element named like a credential: <password>…</password>,
	// <client_secret type="…">…, up to the next tag
	named(credentialWords, '<', `(<`+credentialName+`(?:\s[^<>]*)?>)[^<]+`, "${1}"+Mask),
	named([]string{"bearer"}, 0, `(bearer`+space+`*[:=]`+space+`*["']?)[A-Za-z0-9._~+/=-]{4,}`, "${1}"+Mask),
	// Standard Webhooks signing secrets, raw or escaped: the '_' and the
	// base64 '+', '/' and '=' percent-encoded once (a query) or twice (a
	// query inside a query value), or as JSON \u escapes (and '\/')
	{[]string{"whsec"}, regexp.MustCompile(`(?i)(whsec(?:_|%(?:25)?5f|\\u005f))(?:[A-Za-z0-9+/=_-]|%(?:25)?(?:2b|2f|3d)|\\u00(?:2b|2f|3d)|\\/)+`), "${1}" + Mask, nil},
}

// Text returns s with secrets masked, cut to at most max bytes (DefaultMax
// when max ≤ 0) on a rune boundary, with "…" marking a cut. Masking runs
// on the whole of s before the cut, so a cut cannot leave part of a secret;
// a URL that s itself ends inside of, before the '@' of its credentials, is
// masked from its "://" on.
func Text(s string, max int) string {
	if s == "" {
		return ""
	}
	at := newNeedPlaces(s)
	present := presentNeeds(at.folded)
	for i, r := range rules {
		if present&ruleNeeds[i] == 0 {
			continue
		}
		var out string
		if r.named != nil {
			out = r.named.replace(r.re, s, at.of(r.needs), r.with)
		} else {
			out = r.re.ReplaceAllString(s, r.with)
		}
		if out != s {
			s, at = out, newNeedPlaces(out)
		}
	}
	return Cut(s, max)
}

// namedRule is the other form of a rule whose every match holds one of
// its needs inside the name it starts with (a credential's, a header's, an
// auth scheme's): a run of name
// characters ([A-Za-z0-9_.-]) that the match starts at, or one or two
// bytes before (a quote, an escaped quote, a '<'). Such a match can only
// start near where a need is, so replace tries the rule there, at
// each such place, instead of running the expression over the whole text:
// Go's regular expressions have no literal to skip ahead to when a name
// is matched in any case, and ran at a fraction of a microsecond per byte
// for each of these rules (a 1 KiB body holding one need word took about
// 2 ms to mask, then 3.5 ms once names ending in "key" had to be words;
// about 70 µs of CPU with every rule that starts at a name tried this
// way, each only where its first byte is).
type namedRule struct {
	// anchored is the rule matching only at the start of its input, and
	// without the leading \b of a rule that starts at the name (checked
	// by replace on the whole text, which the input's start does not
	// show).
	anchored *regexp.Regexp
	// at is the byte every match starts with (a quote, a backslash, '<'),
	// or 0 for a match that starts at the name, after a \b.
	at byte
}

// named is a rule whose expression is (?i), then \b when at is 0, then
// body; see namedRule for what body must hold, and at.
func named(needs []string, at byte, body, with string) rule {
	start := ""
	if at == 0 {
		start = `\b`
	}
	return rule{
		needs: needs,
		re:    regexp.MustCompile(`(?i)` + start + body),
		with:  with,
		named: &namedRule{anchored: regexp.MustCompile(`(?i)^(?:` + body + `)`), at: at},
	}
}

// Bounds past which namedRule.replace leaves the text to re: a name run longer
// than maxNameRun would be tried at each of its bytes, and a text holding
// more than maxNeedPlaces needs is tried at too many places.
const (
	maxNameRun    = 64
	maxNeedPlaces = 64
)

// replace is re.ReplaceAllString(s, with) for a named rule, places the
// positions of its needs in s in order (needPlaces.of): the same matches,
// each replaced the same way, found by trying the anchored form at the
// places a match can start, in order. It falls back to re when places is
// nil (see needPlaces.of) or past the bounds.
func (n *namedRule) replace(re *regexp.Regexp, s string, places []int, with string) string {
	if places == nil {
		return re.ReplaceAllString(s, with)
	}
	var b []byte
	last := 0 // s[:last] is in b, replaced where it matched
	next := 0 // no match starts before next: the last one ended there, or every place before it was tried
	for _, q := range places {
		if q < next {
			continue
		}
		run := q
		for run > 0 && nameByte(s[run-1]) {
			run--
		}
		if q-run > maxNameRun {
			return re.ReplaceAllString(s, with)
		}
		for x := max(next, run-2); x <= q; x++ {
			if n.at == 0 && !(nameByte(s[x]) && wordBoundary(s, x)) || n.at != 0 && s[x] != n.at {
				continue
			}
			loc := n.anchored.FindStringSubmatchIndex(s[x:])
			if loc == nil {
				continue
			}
			if loc[1] == 0 { // an empty match: none of these rules has one
				return re.ReplaceAllString(s, with)
			}
			b = append(b, s[last:x]...)
			b = n.anchored.ExpandString(b, with, s[x:], loc)
			last = x + loc[1]
			break
		}
		next = max(next, q+1, last)
	}
	if last == 0 {
		return s
	}
	return string(append(b, s[last:]...))
}

// needPlaces finds where need words are in a text, each word once.
type needPlaces struct {
	folded string // fold(s)
	same   bool   // folded's positions are s's: no rune's folding changed its length
	byWord map[string][]int
}

func newNeedPlaces(s string) *needPlaces {
	f := fold(s)
	return &needPlaces{folded: f, same: len(f) == len(s)}
}

// of returns the positions of needs in the text, in order, or nil when
// they cannot be told: folding changed the text's length, or they are more
// than maxNeedPlaces.
func (p *needPlaces) of(needs []string) []int {
	if !p.same {
		return nil
	}
	if p.byWord == nil {
		p.byWord = make(map[string][]int, len(needs))
	}
	all := []int{}
	for _, w := range needs {
		at, ok := p.byWord[w]
		if !ok {
			for from := 0; ; {
				k := strings.Index(p.folded[from:], w)
				if k < 0 {
					break
				}
				at = append(at, from+k)
				from += k + 1
			}
			p.byWord[w] = at
		}
		all = append(all, at...)
	}
	if len(all) > maxNeedPlaces {
		return nil
	}
	slices.Sort(all)
	return all
}

// nameByte reports whether c may be in a credential name.
func nameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-'
}

// wordBoundary is \b at s[x]: an ASCII word character on one side only.
func wordBoundary(s string, x int) bool {
	isWord := func(c byte) bool {
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
	}
	before := x > 0 && isWord(s[x-1])
	after := x < len(s) && isWord(s[x])
	return before != after
}

// needWords are the needs of all rules, each once, and ruleNeeds[i] the
// set (bit j: needWords[j]) of rules[i]'s: a text is searched once for
// each word, not once for each rule that needs it.
var needWords, ruleNeeds = func() ([]string, []uint64) {
	var words []string
	index := map[string]int{}
	sets := make([]uint64, len(rules))
	for i, r := range rules {
		for _, w := range r.needs {
			j, ok := index[w]
			if !ok {
				j = len(words)
				index[w] = j
				words = append(words, w)
			}
			sets[i] |= 1 << j
		}
	}
	if len(words) > 64 {
		panic("redact: more than 64 need words")
	}
	return words, sets
}()

// presentNeeds is the set of needWords that folded holds.
func presentNeeds(folded string) uint64 {
	var set uint64
	for j, w := range needWords {
		if strings.Contains(folded, w) {
			set |= 1 << j
		}
	}
	return set
}

// fold returns s with what a case-insensitive expression ((?i), Unicode
// simple folding) matches to an ASCII letter spelt as that lower-case
// letter: ASCII upper case, and the two runes outside ASCII whose folding
// reaches one, KELVIN SIGN (U+212A, to k) and LATIN SMALL LETTER LONG S (U+017F,
// to s). Other runes stay as they are: no need spells one.
func fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b.WriteByte(c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch r {
		case '\u212A':
			b.WriteByte('k')
		case '\u017F':
			b.WriteByte('s')
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// credentialField matches a whole field name that names a credential, by
// the rule of name=value pairs and JSON members (credentialName).
var credentialField = regexp.MustCompile(`(?i)^` + credentialName + `$`)

// Field returns the value of a named field of free text (a scope label, a
// map entry) safe to log: Mask when the name is a credential's (api_key,
// X-Auth-Token, password, s3Key: as in name=value pairs and JSON members),
// otherwise value as Text masks and cuts it.
func Field(name, value string, max int) string {
	// The name as given, not folded: the expression folds case itself,
	// and a camelCase "Key" is a word only in its upper case.
	if value != "" && credentialField.MatchString(name) {
		return Mask
	}
	return Text(value, max)
}

// Cut returns s as valid UTF-8 cut to at most max bytes (DefaultMax when
// max ≤ 0) on a rune boundary, with "…" marking a cut. It masks nothing:
// it is for text that is not free-form diagnostics, such as labels.
func Cut(s string, max int) string {
	if max <= 0 {
		max = DefaultMax
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
