// Package memrow holds the rules for a memory row that the write side and the
// read side must agree on: field validation, the canonical JSON of a value,
// its content hash and character count, and the text it is embedded by.
// Keeping them in one place means a hash computed at write time is the hash a
// read compares against.
package memrow

import (
	"fmt"
	"math"
	"unicode"
	"unicode/utf8"
)

const (
	// DefaultIdentity stands for agent, user_id and session_id when the
	// request does not give them.
	DefaultIdentity = "-"
	// MaxKeyBytes bounds memory_key.
	MaxKeyBytes = 256
	// MaxIdentityBytes bounds agent, user_id and session_id.
	MaxIdentityBytes = 256
	// MaxNameBytes bounds org and namespace names.
	MaxNameBytes = 128
	// DefaultCharLimit is the number of characters (runes) a canonical value
	// may hold when the namespace sets no limit of its own.
	DefaultCharLimit = 16000
	// DefaultMemoryType is the type of a memory written without one.
	DefaultMemoryType = "fact"

	// MaxTags and MaxTagBytes bound the tags of one memory.
	MaxTags     = 64
	MaxTagBytes = 128
)

// Error codes carried by FieldError; the HTTP layer puts them in the error
// envelope.
const (
	CodeValidationFailed  = "VALIDATION_FAILED"
	CodeCharLimitExceeded = "CHAR_LIMIT_EXCEEDED"
)

// FieldError is a validation failure of one request field; the HTTP layer
// turns it into 422 VALIDATION_FAILED (or the Code given) naming Field.
type FieldError struct {
	Field   string
	Code    string
	Message string
}

func (e *FieldError) Error() string {
	return e.Field + ": " + e.Message
}

func invalid(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Code: CodeValidationFailed, Message: fmt.Sprintf(format, args...)}
}

// ValidateKey checks a memory_key: 1..MaxKeyBytes bytes of valid UTF-8, no
// control characters, and not only whitespace (such a key is invisible in
// every listing and cannot be told apart from another blank one).
func ValidateKey(key string) error {
	const field = "memory_key"
	if err := checkPlain(field, key, MaxKeyBytes); err != nil {
		return err
	}
	for _, r := range key {
		if !unicode.IsSpace(r) {
			return nil
		}
	}
	return invalid(field, "must not be only whitespace")
}

// ValidateIdentity checks agent, user_id or session_id: 1..MaxIdentityBytes
// bytes of valid UTF-8 without control characters. Callers substitute
// DefaultIdentity for an absent value before validating.
func ValidateIdentity(field, v string) error {
	return checkPlain(field, v, MaxIdentityBytes)
}

// ValidateName checks an org or namespace name against
// ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$. '/' is never allowed because it
// separates org and namespace in Kafka record keys.
func ValidateName(field, v string) error {
	if v == "" {
		return invalid(field, "must not be empty")
	}
	if len(v) > MaxNameBytes {
		return invalid(field, "is %d bytes, longer than %d", len(v), MaxNameBytes)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum || i > 0 && (c == '.' || c == '_' || c == '-') {
			continue
		}
		r, _ := utf8.DecodeRuneInString(v[i:])
		if i == 0 {
			return invalid(field, "must start with an ASCII letter (a-z, A-Z) or digit, not %q", r)
		}
		return invalid(field, "has %q at byte %d; only ASCII letters (a-z, A-Z), digits, '.', '_' and '-' are allowed", r, i)
	}
	return nil
}

// ValidateTags checks the tags of a memory: at most MaxTags, each
// 1..MaxTagBytes bytes of valid UTF-8 without control characters.
func ValidateTags(tags []string) error {
	const field = "tags"
	if len(tags) > MaxTags {
		return invalid(field, "has %d tags, more than %d", len(tags), MaxTags)
	}
	for i, t := range tags {
		if err := checkPlain(field, t, MaxTagBytes); err != nil {
			fe := err.(*FieldError)
			fe.Message = fmt.Sprintf("tag %d %s", i, fe.Message)
			return fe
		}
	}
	return nil
}

// ValidateConfidence checks that confidence lies in [0, 1].
func ValidateConfidence(c float64) error {
	if math.IsNaN(c) || c < 0 || c > 1 {
		return invalid("confidence", "must be between 0 and 1, got %v", c)
	}
	return nil
}

// checkPlain is the common rule for short identifiers: non-empty, bounded,
// valid UTF-8, no control characters (C0, DEL, C1). Control characters are
// refused because they are invisible in logs and UIs and NUL cannot be stored
// in Postgres text.
func checkPlain(field, v string, maxBytes int) error {
	if v == "" {
		return invalid(field, "must not be empty")
	}
	if len(v) > maxBytes {
		return invalid(field, "is %d bytes, longer than %d", len(v), maxBytes)
	}
	for i, r := range v {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(v[i:]); size == 1 {
				return invalid(field, "is not valid UTF-8 at byte %d", i)
			}
		}
		if isControl(r) {
			return invalid(field, "has control character U+%04X at byte %d", r, i)
		}
	}
	return nil
}

func isControl(r rune) bool {
	return r < 0x20 || r >= 0x7f && r <= 0x9f
}

// Validate checks an identity's key, then its agent, user_id and session_id.
func (id Identity) Validate() error {
	if err := ValidateKey(id.MemoryKey); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"agent", id.Agent}, {"user_id", id.UserID}, {"session_id", id.SessionID}} {
		if err := ValidateIdentity(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}
