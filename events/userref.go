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

// AgentRef and SessionRef name a writer identity by reference, as UserRef names a
// user: HMAC-SHA256 of "loom.agent:" || agent ("loom.session:" || session) under the
// org's user reference key, in lowercase hex, the values Postgres's loom.agent_ref and
// loom.session_ref store. The prefix keeps them apart from a user's and a key's
// reference. "" and "-" (none given) name no one and are answered as they are.
func AgentRef(key []byte, agent string) (string, error) {
	return writerRef(key, "loom.agent:", agent)
}

// SessionRef is AgentRef for a session id.
func SessionRef(key []byte, session string) (string, error) {
	return writerRef(key, "loom.session:", session)
}

// KeyRef is a memory key's reference, as Postgres's loom.key_ref stores it.
func KeyRef(key []byte, memoryKey string) (string, error) {
	return prefixedRef(key, "loom.key:", memoryKey)
}

func writerRef(key []byte, prefix, v string) (string, error) {
	if v == "" || v == "-" {
		return v, nil
	}
	return prefixedRef(key, prefix, v)
}

func prefixedRef(key []byte, prefix, v string) (string, error) {
	if len(key) != UserRefKeySize {
		return "", errors.New("events: user reference key is not 32 bytes")
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(prefix))
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil)), nil
}

// Opened fills in a version 2 revision's user id and content digest, and a version 3
// revision's agent and session id too, from its opened content, so that a follower
// reads one shape whatever version a record was written in. What a record written
// before carries in the clear already is left as it is.
func Opened(r *Revision, c *Content) {
	if r == nil || c == nil {
		return
	}
	if r.Agent == "" {
		r.Agent = c.Agent
	}
	if r.SessionID == "" {
		r.SessionID = c.SessionID
	}
	if r.UserID == "" {
		r.UserID = c.UserID
	}
	if r.ContentSHA256 == "" {
		r.ContentSHA256 = c.ContentSHA256
	}
}
