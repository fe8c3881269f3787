package debugbundle

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
)

// Placeholders the scrubber writes in place of what it removes.
const (
	redacted     = "(redacted)"
	redactedUUID = "(redacted-uuid)"
	redactedJWT  = "(redacted-jwt)"
)

var (
	// A UUID: the form of setup keys (and of many IDs, which go too).
	uuidRE = regexp.MustCompile(`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`)
	// A JWT (header.payload.signature, the header starting with {").
	jwtRE = regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`)
	// An Authorization header's credentials.
	bearerRE = regexp.MustCompile(`(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{8,}`)
	// NetBird personal access tokens.
	patRE = regexp.MustCompile(`\bnbp_[A-Za-z0-9]{30,}`)
	// A password in a URL's user info: scheme://user:password@host.
	urlPasswordRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@"']*):([^/\s@"']+)@`)
	// A secret named in a key=value, key: value or "key": "value" pair.
	secretPairRE = regexp.MustCompile(`(?i)((?:password|passwd|secret|token|psk|preshared|pre_shared|private_?key|setup_?key|api_?key|credential)[\w.-]*"?\s*[:=]\s*)("(?:[^"\\]|\\.)*"|'[^']*'|[^\s,;&}\])]+)`)
)

// Scrubber removes secrets from text and, when anonymizing, replaces
// public IP addresses, domain names and e-mail addresses with
// placeholders. One Scrubber serves one bundle: the same address or name
// becomes the same placeholder in every file of it. It is not safe for
// concurrent use.
type Scrubber struct {
	secrets   []string // literals that never appear (the profile's private key...)
	anonymize bool
	strict    bool // anonymize internal addresses and WireGuard keys too
	keys      map[string]string

	ips     map[netip.Addr]netip.Addr
	domains map[string]string
	emails  map[string]string
	names   []*regexp.Regexp // single-label names (the host name) and their placeholders
	nameLow []string
	nameFor []string
}

// NewScrubber returns a scrubber that always redacts secrets (the
// literals given plus everything that looks like a key, token or
// password) and, with anonymize, replaces public addresses and names.
func NewScrubber(anonymize bool, secrets ...string) *Scrubber {
	s := &Scrubber{anonymize: anonymize, ips: map[netip.Addr]netip.Addr{}, domains: map[string]string{}, emails: map[string]string{}, keys: map[string]string{}}
	for _, v := range secrets {
		if len(v) >= 8 { // shorter literals would blank out ordinary words
			s.secrets = append(s.secrets, v)
		}
	}
	return s
}

// SetStrict makes anonymizing also replace private and overlay
// addresses and WireGuard public keys (NetBird's "strict" level).
func (s *Scrubber) SetStrict() { s.strict = true }

// AddNames makes anonymizing also replace these single-label names (the
// machine's host name), which no pattern can tell from other words.
func (s *Scrubber) AddNames(names ...string) {
	for _, n := range names {
		if len(n) < 3 || strings.Contains(n, ".") {
			continue // dotted names are found as domains
		}
		s.names = append(s.names, regexp.MustCompile(`(?i)\b`+regexp.QuoteMeta(n)+`\b`))
		s.nameLow = append(s.nameLow, strings.ToLower(n))
		s.nameFor = append(s.nameFor, fmt.Sprintf("anon-host-%d", len(s.names)))
	}
}

// Scrub returns b with secrets (and, when anonymizing, addresses and
// names) replaced.
func (s *Scrubber) Scrub(b []byte) []byte { return []byte(s.String(string(b))) }

// String is Scrub for a string. It works line by line, and runs each
// pattern only on the lines that can hold it: logs are large.
func (s *Scrubber) String(in string) string {
	var out strings.Builder
	out.Grow(len(in))
	for len(in) > 0 {
		line, rest, found := strings.Cut(in, "\n")
		out.WriteString(s.line(line))
		if found {
			out.WriteByte('\n')
		}
		in = rest
	}
	return out.String()
}

func (s *Scrubber) line(in string) string {
	for _, v := range s.secrets {
		in = strings.ReplaceAll(in, v, redacted)
	}
	low := strings.ToLower(in)
	if strings.Contains(in, "://") && strings.Contains(in, "@") {
		in = urlPasswordRE.ReplaceAllString(in, "${1}:"+redacted+"@")
	}
	if strings.Contains(in, "eyJ") {
		in = jwtRE.ReplaceAllString(in, redactedJWT)
	}
	if strings.Contains(in, "nbp_") {
		in = patRE.ReplaceAllString(in, redacted)
	}
	if strings.Contains(low, "bearer") || strings.Contains(low, "basic") || strings.Contains(low, "token") {
		in = bearerRE.ReplaceAllString(in, "${1}${2}"+redacted)
	}
	if containsAny(low, secretWords) {
		in = secretPairRE.ReplaceAllStringFunc(in, redactPair)
	}
	if strings.Count(in, "-") >= 4 {
		in = uuidRE.ReplaceAllString(in, redactedUUID)
	}
	if !s.anonymize {
		return in
	}
	if strings.Contains(in, "@") {
		in = emailRE.ReplaceAllStringFunc(in, s.email)
	}
	if s.strict && strings.Contains(in, "=") {
		in = wgKeyRE.ReplaceAllStringFunc(in, s.wgKey)
	}
	for i, re := range s.names {
		if strings.Contains(low, s.nameLow[i]) {
			in = re.ReplaceAllLiteralString(in, s.nameFor[i])
		}
	}
	in = replaceRuns(in, isNameByte, s.nameOrIPv4)
	if strings.Count(in, ":") >= 2 {
		in = replaceRuns(in, isIPv6Byte, s.ipv6)
	}
	return in
}

// secretWords are the names secretPairRE looks for, lower-cased.
var secretWords = []string{"password", "passwd", "secret", "token", "psk", "preshared", "pre_shared", "private", "setup", "api_key", "apikey", "credential"}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// redactPair keeps a pair's key and replaces its value, quoted or not.
func redactPair(m string) string {
	sub := secretPairRE.FindStringSubmatch(m)
	k, v := sub[1], sub[2]
	switch {
	case v == `""` || v == `''` || v == "null" || v == redacted || strings.HasPrefix(v, "(redacted"):
		return m
	case strings.HasPrefix(v, `"`):
		return k + `"` + redacted + `"`
	case strings.HasPrefix(v, `'`):
		return k + `'` + redacted + `'`
	}
	return k + redacted
}

var (
	emailRE = regexp.MustCompile(`\b[A-Za-z0-9._%+-]+@([A-Za-z0-9-]+\.)+[A-Za-z]{2,63}\b`)
)

// notTLD are last labels that name files, code or formats, not domains.
var notTLD = map[string]bool{
	"go": true, "json": true, "txt": true, "log": true, "gz": true, "tar": true, "conf": true, "yaml": true, "yml": true,
	"toml": true, "sock": true, "pid": true, "sh": true, "py": true, "proto": true, "pem": true, "crt": true, "key": true,
	"md": true, "html": true, "js": true, "css": true, "db": true, "sqlite": true, "service": true, "socket": true, "timer": true,
	"mod": true, "sum": true, "zip": true, "exe": true, "dll": true, "so": true, "bak": true, "tmp": true, "old": true,
	"original": true, "lock": true, "state": true, "local": true, "localhost": true, "invalid": true, "arpa": true,
	"xml": true, "csv": true, "ini": true, "cfg": true, "err": true, "out": true,
}

// keepDomains are names that say nothing about the user.
var keepDomains = map[string]bool{"netbird.io": true, "netbird.cloud": true, "api.netbird.io": true, "github.com": true, "pkg.go.dev": true}

func (s *Scrubber) email(m string) string {
	low := strings.ToLower(m)
	p, ok := s.emails[low]
	if !ok {
		p = fmt.Sprintf("user-%d@anon.invalid", len(s.emails)+1)
		s.emails[low] = p
	}
	return p
}

func (s *Scrubber) anonIP(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if p, ok := s.ips[a]; ok {
		return p
	}
	n := uint32(len(s.ips) + 1)
	var p netip.Addr
	if a.Is4() {
		// 240.0.0.0/4 is reserved: no real address is ever mistaken for a
		// placeholder, and it has room for 2^28 of them.
		p = netip.AddrFrom4([4]byte{240 | byte(n>>24&0x0f), byte(n >> 16), byte(n >> 8), byte(n)})
	} else {
		b := [16]byte{0x20, 0x01, 0x0d, 0xb8} // 2001:db8::/32, for documentation
		b[12], b[13], b[14], b[15] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
		p = netip.AddrFrom16(b)
	}
	s.ips[a] = p
	return p
}

var (
	overlay   = netip.MustParsePrefix("100.64.0.0/10")
	reserved4 = netip.MustParsePrefix("240.0.0.0/4")
	docNets   = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8::/32")}
)

// replaces reports whether anonymizing replaces a.
func (s *Scrubber) replaces(a netip.Addr) bool {
	if Public(a) {
		return true
	}
	a = a.Unmap()
	return s.strict && (a.IsPrivate() || overlay.Contains(a))
}

// wgKeyRE is a WireGuard key: 32 bytes in standard base64.
var wgKeyRE = regexp.MustCompile(`[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=`)

func (s *Scrubber) wgKey(m string) string {
	p, ok := s.keys[m]
	if !ok {
		p = fmt.Sprintf("(wg-key-%d)", len(s.keys)+1)
		s.keys[m] = p
	}
	return p
}

// Public reports whether a is an address anonymizing replaces: a global
// unicast address outside the private ranges (RFC 1918), the overlay's
// shared space (100.64.0.0/10), loopback, link-local and the
// documentation ranges. IPv6 unique local addresses are replaced too:
// their random global ID names the network.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if a.Is6() && netip.MustParsePrefix("fc00::/7").Contains(a) {
		return true
	}
	if !a.IsGlobalUnicast() || a.IsPrivate() || overlay.Contains(a) || reserved4.Contains(a) {
		return false
	}
	for _, p := range docNets {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// replaceRuns hands each maximal run of bytes in a class to f, with
// the bytes around it, and uses its answer.
func replaceRuns(in string, inClass func(byte) bool, f func(run string, before, before2, after, after2 byte) (string, bool)) string {
	var out strings.Builder
	last := 0
	at := func(i int) byte {
		if i < 0 || i >= len(in) {
			return 0
		}
		return in[i]
	}
	for i := 0; i < len(in); {
		if !inClass(in[i]) {
			i++
			continue
		}
		j := i
		for j < len(in) && inClass(in[j]) {
			j++
		}
		// Runs end at a dot or dash that ends a sentence or a list.
		k := j
		for k > i && (in[k-1] == '.' || in[k-1] == '-') {
			k--
		}
		if k > i {
			if r, ok := f(in[i:k], at(i-1), at(i-2), at(k), at(k+1)); ok {
				if out.Len() == 0 {
					out.Grow(len(in))
				}
				out.WriteString(in[last:i])
				out.WriteString(r)
				last = k
			}
		}
		i = j
	}
	if last == 0 {
		return in
	}
	out.WriteString(in[last:])
	return out.String()
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c == '.' || c == '-'
}

func isIPv6Byte(c byte) bool { return isHex(c) || c == ':' || c == '.' }

// nameOrIPv4 replaces a public IPv4 address or a domain name.
func (s *Scrubber) nameOrIPv4(run string, before, before2, after, after2 byte) (string, bool) {
	if !strings.Contains(run, ".") {
		return run, false
	}
	labels := strings.Split(run, ".")
	last := labels[len(labels)-1]
	if allDigits(last) {
		// 1.2.3.4, not 1.2.3.4.5 (a version) nor a run after or before
		// another dotted number.
		if len(labels) != 4 || before == '.' || after == '.' && isDigit(after2) {
			return run, false
		}
		a, err := netip.ParseAddr(run)
		if err != nil || !s.replaces(a) {
			return run, false
		}
		return s.anonIP(a).String(), true
	}
	if len(last) < 2 || !allLetters(last) || strings.HasPrefix(run, "-") {
		return run, false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return run, false
		}
	}
	low := strings.ToLower(run)
	// pkg.Func, slog.Logger, file.go:12, /path/file.ext: not names.
	if notTLD[strings.ToLower(last)] || keepDomains[low] || run != low || before == '/' && before2 != '/' || after == '(' {
		return run, false
	}
	p, ok := s.domains[low]
	if !ok {
		p = fmt.Sprintf("anon-%d.domain.invalid", len(s.domains)+1)
		s.domains[low] = p
	}
	return p, true
}

// ipv6 replaces a public IPv6 address.
func (s *Scrubber) ipv6(run string, before, _, after, _ byte) (string, bool) {
	if strings.Count(run, ":") < 2 || isNameByte(before) && before != '.' || isNameByte(after) && after != '.' {
		return run, false
	}
	a, err := netip.ParseAddr(run)
	if err != nil || !a.Is6() || a.Is4In6() || !s.replaces(a) {
		return run, false
	}
	return s.anonIP(a).String(), true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

func allLetters(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
