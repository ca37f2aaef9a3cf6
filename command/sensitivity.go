package command

import (
	"regexp"
	"strings"
)

// sensitiveKind is one class of secret or personal data the detector recognises.
type sensitiveKind struct {
	name  string
	re    *regexp.Regexp
	check func(match string) bool // a second look that keeps false positives down; nil accepts
}

var sensitiveKinds = []sensitiveKind{
	{name: "private_key", re: regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)},
	{name: "aws_access_key", re: regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`)},
	{name: "github_token", re: regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36,}\b`)},
	{name: "api_key", re: regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}`)},
	{name: "slack_token", re: regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`)},
	{name: "jwt", re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)},
	{name: "credential", re: regexp.MustCompile(`(?i)\b(?:password|passwd|passphrase|secret|api[_-]?key|access[_-]?token)\b\s*(?:is|[:=])\s*\S{6,}`)},
	{name: "email", re: regexp.MustCompile(`\b[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\b`)},
	{name: "card_number", re: regexp.MustCompile(`\b(?:\d[ -]?){12,18}\d\b`), check: luhn},
	{name: "national_id", re: regexp.MustCompile(`\b\d{3}-\d{2}-\d{4}\b`)},
	{name: "phone", re: regexp.MustCompile(`\+\d{1,3}[ .-]?\(?\d{1,4}\)?(?:[ .-]?\d{2,4}){2,4}\b`)},
	{name: "iban", re: regexp.MustCompile(`\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?\b`), check: ibanValid},
}

// detectSensitive names the kinds of secret or personal data text holds. Any kind
// makes a row high: it gets no search document, is never a peer, and keeps only the
// sensitive retention.
func detectSensitive(text string) []string {
	var kinds []string
	for _, k := range sensitiveKinds {
		for _, m := range k.re.FindAllString(text, 4) {
			if k.check == nil || k.check(m) {
				kinds = append(kinds, k.name)
				break
			}
		}
	}
	return kinds
}

// luhn is the card-number checksum.
func luhn(s string) bool {
	sum, n, double := 0, 0, false
	for i := len(s) - 1; i >= 0; i-- {
		c := s[i]
		if c < '0' || c > '9' {
			continue
		}
		d := int(c - '0')
		if double {
			if d *= 2; d > 9 {
				d -= 9
			}
		}
		sum += d
		n++
		double = !double
	}
	return n >= 13 && sum%10 == 0
}

// ibanValid is the ISO 13616 mod-97 check.
func ibanValid(s string) bool {
	s = strings.ReplaceAll(s, " ", "")
	if len(s) < 15 || len(s) > 34 {
		return false
	}
	r := s[4:] + s[:4]
	mod := 0
	for _, c := range r {
		switch {
		case c >= '0' && c <= '9':
			mod = (mod*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			mod = (mod*100 + int(c-'A') + 10) % 97
		default:
			return false
		}
	}
	return mod == 1
}
