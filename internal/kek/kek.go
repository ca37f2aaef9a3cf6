// Package kek wraps the data keys Loom stores in Postgres (a revision's key, an org's
// user reference key, a deferred extraction's key) under a key-encryption key the
// deployment is configured with (LOOM_KEK), so a copy of the database, its WAL or a
// backup holds no key that opens anything without the KEK. Unwrapped keys live only in
// the memory of the processes using them.
//
// Postgres opens rows in SQL (loom.opened_row, migration 056), so the wrapping is one
// pgcrypto can undo: AES-256-CBC, without padding, of the 32-byte key under a key
// derived from the KEK, then HMAC-SHA256 over the whole under a second derived key
// (encrypt-then-MAC; pgcrypto has no AES-GCM). A session is given only the derived
// encryption keys (SessionParam), never the KEK or the MAC key: loom.unwrapped_key
// (migration 059) checks which KEK a key was wrapped under by its id and decrypts;
// Unwrap here checks the MAC as well.
//
// A ring holds one KEK or several: the first wraps, every one unwraps, which is how a
// KEK is rotated (configure "new,old", let the at-rest pass wrap every key again under
// the new one, then drop the old).
package kek

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// SessionParam is the Postgres session setting that carries a ring's decryption keys
// (SessionValue) to loom.unwrapped_key.
const SessionParam = "loom.kek"

// KeySize is the size of a KEK and of every key it wraps.
const KeySize = 32

const (
	format     = 1
	idSize     = 8
	ivSize     = aes.BlockSize
	macSize    = sha256.Size
	headerSize = 1 + idSize + ivSize
	// WrappedSize is the size of a wrapped key: format, KEK id, IV, ciphertext, MAC.
	WrappedSize = headerSize + KeySize + macSize
)

// ErrNotOpened is a wrapped key that no KEK of the ring opens: wrapped under a KEK the
// ring lacks, or damaged.
var ErrNotOpened = errors.New("kek: the key is not wrapped under any configured LOOM_KEK")

type kek struct {
	id       [idSize]byte
	enc, mac []byte
}

// Ring is the configured KEKs.
type Ring struct {
	keks []kek // keks[0] wraps
}

// Generate returns a new KEK as LOOM_KEK takes it (base64 of 32 random bytes).
func Generate() (string, error) {
	b := make([]byte, KeySize)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("kek: generate: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// Parse reads LOOM_KEK: one KEK, or a comma-separated list whose first wraps and
// whose every one unwraps; each is base64 of 32 bytes.
func Parse(setting string) (*Ring, error) {
	r := &Ring{}
	seen := map[[idSize]byte]bool{}
	for i, part := range strings.Split(setting, ",") {
		part = strings.TrimSpace(part)
		raw, err := base64.StdEncoding.DecodeString(part)
		if err != nil || len(raw) != KeySize {
			return nil, fmt.Errorf("LOOM_KEK: entry %d is not base64 of %d bytes (make one with `openssl rand -base64 32`)", i+1, KeySize)
		}
		k := kek{enc: derive(raw, "loom.kek.enc"), mac: derive(raw, "loom.kek.mac")}
		copy(k.id[:], derive(raw, "loom.kek.id"))
		if seen[k.id] {
			return nil, fmt.Errorf("LOOM_KEK: entry %d repeats an earlier one", i+1)
		}
		seen[k.id] = true
		r.keks = append(r.keks, k)
	}
	return r, nil
}

func derive(k []byte, label string) []byte {
	m := hmac.New(sha256.New, k)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// Wrap wraps a 32-byte key under the ring's first KEK.
func (r *Ring) Wrap(key []byte) ([]byte, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("kek: wrap a key of %d bytes, want %d", len(key), KeySize)
	}
	k := r.keks[0]
	out := make([]byte, WrappedSize)
	out[0] = format
	copy(out[1:], k.id[:])
	iv := out[1+idSize : headerSize]
	if _, err := rand.Read(iv); err != nil {
		return nil, fmt.Errorf("kek: wrap: %w", err)
	}
	block, err := aes.NewCipher(k.enc)
	if err != nil {
		return nil, err
	}
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(out[headerSize:headerSize+KeySize], key)
	m := hmac.New(sha256.New, k.mac)
	m.Write(out[:headerSize+KeySize])
	copy(out[headerSize+KeySize:], m.Sum(nil))
	return out, nil
}

// Raw reports whether a stored key is not wrapped: one written before LOOM_KEK.
func Raw(stored []byte) bool { return len(stored) == KeySize }

// Unwrap opens a stored key. A raw key (written before LOOM_KEK) is returned as it is.
func (r *Ring) Unwrap(stored []byte) ([]byte, error) {
	if Raw(stored) {
		return stored, nil
	}
	k, ok := r.kekOf(stored)
	if !ok {
		return nil, ErrNotOpened
	}
	m := hmac.New(sha256.New, k.mac)
	m.Write(stored[:headerSize+KeySize])
	if !hmac.Equal(m.Sum(nil), stored[headerSize+KeySize:]) {
		return nil, ErrNotOpened
	}
	block, err := aes.NewCipher(k.enc)
	if err != nil {
		return nil, err
	}
	key := make([]byte, KeySize)
	cipher.NewCBCDecrypter(block, stored[1+idSize:headerSize]).CryptBlocks(key, stored[headerSize:headerSize+KeySize])
	return key, nil
}

// Current reports whether a stored key is wrapped under the ring's first KEK: what
// the at-rest pass leaves every key.
func (r *Ring) Current(stored []byte) bool {
	return len(stored) == WrappedSize && stored[0] == format && hmac.Equal(stored[1:1+idSize], r.keks[0].id[:])
}

// CurrentID is the id of the ring's first KEK as the stored keys carry it (bytes 2 to
// 9 of a wrapped key), for a query that finds the keys still to wrap again.
func (r *Ring) CurrentID() []byte { return append([]byte(nil), r.keks[0].id[:]...) }

// IDs are the ids of the ring's KEKs, in its order (none for a nil ring): what a copy
// of state opened under the ring (an index checkpoint) records, so that a process
// without one of them does not take it up.
func (r *Ring) IDs() [][]byte {
	if r == nil {
		return nil
	}
	ids := make([][]byte, len(r.keks))
	for i, k := range r.keks {
		ids[i] = append([]byte(nil), k.id[:]...)
	}
	return ids
}

func (r *Ring) kekOf(stored []byte) (kek, bool) {
	if len(stored) != WrappedSize || stored[0] != format {
		return kek{}, false
	}
	for _, k := range r.keks {
		if hmac.Equal(stored[1:1+idSize], k.id[:]) {
			return k, true
		}
	}
	return kek{}, false
}

// SessionValue is what a Postgres session is given as SessionParam: for each KEK its
// id and its derived encryption key, hex, "id:key" joined by commas. It opens keys in
// SQL (loom.unwrapped_key) and cannot make a wrapped key Unwrap accepts.
func (r *Ring) SessionValue() string {
	parts := make([]string, len(r.keks))
	for i, k := range r.keks {
		parts[i] = hex.EncodeToString(k.id[:]) + ":" + hex.EncodeToString(k.enc)
	}
	return strings.Join(parts, ",")
}

// NewKey makes a data key of a row's own and returns it with its stored form: wrapped
// under ring, or as it is when the deployment has no KEK (ring nil). A row sealed
// under it is shredded with it: deleting the row, or its key, leaves nothing that
// opens the text.
func NewKey(ring *Ring) (key, stored []byte, err error) {
	key = make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, nil, fmt.Errorf("make a data key: %w", err)
	}
	if ring == nil {
		return key, key, nil
	}
	if stored, err = ring.Wrap(key); err != nil {
		return nil, nil, err
	}
	return key, stored, nil
}

// OpenKey opens a stored key NewKey made (a raw one as it is; ring nil: only a raw one).
func OpenKey(ring *Ring, stored []byte) ([]byte, error) {
	if ring == nil {
		if !Raw(stored) {
			return nil, ErrNotOpened
		}
		return stored, nil
	}
	return ring.Unwrap(stored)
}
