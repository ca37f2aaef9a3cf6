package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
)

// UserRefKeySize is the size of an org's user reference key.
const UserRefKeySize = 32

// UserRef is how the plain fields name a user from envelope version 2 on: the
// HMAC-SHA256 of the user id under the org's user reference key, in lowercase hex. A
// consumer can group and fence by it without learning the id, and nobody without the
// key can confirm a guessed id against it.
func UserRef(key []byte, userID string) (string, error) {
	if len(key) != UserRefKeySize {
		return "", errors.New("events: user reference key is not 32 bytes")
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(userID))
	return hex.EncodeToString(m.Sum(nil)), nil
}

// Opened fills in a version 2 revision's user id and content digest from its opened
// content, so that a follower reads one shape whatever version a record was written
// in. A version 1 revision carries both already and is left as it is.
func Opened(r *Revision, c *Content) {
	if r == nil || c == nil {
		return
	}
	if r.UserID == "" {
		r.UserID = c.UserID
	}
	if r.ContentSHA256 == "" {
		r.ContentSHA256 = c.ContentSHA256
	}
}
