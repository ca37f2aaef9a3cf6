package memrow

import "unicode/utf8"

// CheckJSONText scans raw JSON bytes for text that Postgres text/jsonb cannot
// store or that decoding would silently alter: a raw NUL byte, a \u0000
// escape, a lone UTF-16 surrogate escape, or invalid UTF-8. It must run on the
// raw bytes because encoding/json replaces bad text with U+FFFD instead of
// failing, so after decoding the damage is invisible. Escapes are recognised
// only inside strings, honouring escaped backslashes. It does not check JSON
// syntax; Canonical does that.
func CheckJSONText(field string, raw []byte) error {
	inString := false
	// pendingHigh is the offset of a high surrogate escape still waiting for
	// its low half, or -1.
	pendingHigh := -1
	loneHigh := func() error {
		return invalid(field, "has a lone UTF-16 high surrogate escape at byte %d", pendingHigh)
	}
	for i := 0; i < len(raw); {
		c := raw[i]
		if c == 0 {
			return invalid(field, "has a NUL byte at byte %d", i)
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				return invalid(field, "is not valid UTF-8 at byte %d", i)
			}
			if pendingHigh >= 0 {
				return loneHigh()
			}
			i += size
			continue
		}
		if !inString {
			if c == '"' {
				inString = true
			}
			i++
			continue
		}
		if c != '\\' {
			if pendingHigh >= 0 {
				return loneHigh()
			}
			if c == '"' {
				inString = false
			}
			i++
			continue
		}
		// An escape. Only \uXXXX matters here; a malformed one is left for
		// the JSON parser to reject.
		if i+1 >= len(raw) || raw[i+1] != 'u' {
			if pendingHigh >= 0 {
				return loneHigh()
			}
			i += 2 // skips the escaped byte, so "\\" cannot start another escape
			continue
		}
		cp, ok := hex4(raw[i+2:])
		if !ok {
			if pendingHigh >= 0 {
				return loneHigh()
			}
			i += 2
			continue
		}
		switch {
		case cp == 0:
			return invalid(field, "has a \\u0000 escape at byte %d; NUL cannot be stored", i)
		case cp >= 0xDC00 && cp <= 0xDFFF:
			if pendingHigh < 0 {
				return invalid(field, "has a lone UTF-16 low surrogate escape at byte %d", i)
			}
			pendingHigh = -1
		case pendingHigh >= 0:
			return loneHigh()
		case cp >= 0xD800 && cp <= 0xDBFF:
			pendingHigh = i
		}
		i += 6
	}
	if pendingHigh >= 0 {
		return loneHigh()
	}
	return nil
}

// hex4 decodes the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// CheckText rejects a Go string Postgres text cannot store faithfully: one
// with a NUL byte or invalid UTF-8 (which includes UTF-8-encoded surrogates).
func CheckText(field, s string) error {
	for i := 0; i < len(s); {
		c := s[i]
		if c == 0 {
			return invalid(field, "has a NUL byte at byte %d", i)
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return invalid(field, "is not valid UTF-8 at byte %d", i)
		}
		i += size
	}
	return nil
}
