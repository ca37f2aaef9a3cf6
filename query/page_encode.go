package query

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/loomplane/loom/internal/memrow"
)

// A parked pool is stored packed: its candidates in one binary blob (a table of the
// strings they name, then per candidate the indexes of its identity, type and leg
// names, its content hash's 32 bytes and its scores as float64 bits) in the packed
// bytea column, kept out of line and uncompressed. Parking a search's few hundred
// candidates as JSON objects cost Postgres some 6 ms of CPU a search (the jsonb parse
// and its compression); the blob as a base64 string in the jsonb column still cost
// 0.9 ms (pglz compressing 40 KB); as bytea it is 0.07 ms alone, 0.2 ms under a
// search load (docs/bench/RESULTS-index.md, "Wave 7").
//
// The pool column keeps one {"id": {"namespace", "user_id"}} element per scope the
// pool names, the shape erasure's containment test finds a parked page by
// (internal/erasure's registry). A pool parked by an older process (the blob as a
// {"packed": base64} element of the pool column, or an array of parkedCandidate
// objects) is still read.

// packedVersion is the blob's first byte.
const packedVersion = 1

// parkedElement is one element of the pool column: a scope, the packed blob, or (as an
// older process parked it) a candidate.
type parkedElement struct {
	parkedCandidate
	Packed []byte `json:"packed,omitempty"`
}

// scopeElement is a scope of a packed pool, in the shape of an older pool's candidate.
type scopeElement struct {
	ID struct {
		Namespace string `json:"namespace"`
		UserID    string `json:"user_id"`
	} `json:"id"`
}

// packPool encodes the pool as its row holds it: the scopes it names (the pool column)
// and its candidates (the packed column).
func packPool(pool []*candidate) (scopes, packed []byte, err error) {
	packed, err = packCandidates(pool)
	if err != nil {
		return nil, nil, err
	}
	type scope struct{ ns, user string }
	seen := map[scope]bool{}
	var elements []scopeElement
	for _, c := range pool {
		sc := scope{c.identity.Namespace, c.identity.UserID}
		if seen[sc] {
			continue
		}
		seen[sc] = true
		var el scopeElement
		el.ID.Namespace, el.ID.UserID = sc.ns, sc.user
		elements = append(elements, el)
	}
	if scopes, err = json.Marshal(elements); err != nil {
		return nil, nil, err
	}
	if elements == nil {
		scopes = []byte("[]")
	}
	return scopes, packed, nil
}

// unpackPool decodes a parked pool from its row: the packed column, or (parked by an
// older process) the pool column alone.
func unpackPool(scopes, packed []byte) ([]*candidate, error) {
	if packed != nil {
		return unpackCandidates(packed)
	}
	var elements []parkedElement
	if err := json.Unmarshal(scopes, &elements); err != nil {
		return nil, err
	}
	for _, el := range elements {
		if el.Packed != nil {
			return unpackCandidates(el.Packed)
		}
	}
	pool := make([]*candidate, len(elements))
	for i, el := range elements {
		c := el.parkedCandidate
		pool[i] = &candidate{identity: c.Identity, contentSHA256: c.SHA, memoryType: c.Type, scores: legScoresOf(c.Scores), coverage: c.Coverage,
			fused: c.Fused, relevance: c.Relevance}
	}
	return pool, nil
}

func packCandidates(pool []*candidate) ([]byte, error) {
	strs := make(map[string]uint64, len(pool)+16)
	var table []string
	// Most fields repeat the previous candidate's (the org, the namespace, the agent):
	// each field position remembers its last string and index.
	var last [7]struct {
		s  string
		i  uint64
		ok bool
	}
	ref := func(s string) uint64 {
		i, ok := strs[s]
		if !ok {
			i = uint64(len(table))
			strs[s] = i
			table = append(table, s)
		}
		return i
	}
	field := func(pos int, s string) uint64 {
		if l := &last[pos]; l.ok && l.s == s {
			return l.i
		}
		i := ref(s)
		last[pos].s, last[pos].i, last[pos].ok = s, i, true
		return i
	}
	body := make([]byte, 0, 96*len(pool))
	f64 := func(f float64) error {
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("a parked score is not a number: %v", f)
		}
		body = binary.LittleEndian.AppendUint64(body, math.Float64bits(f))
		return nil
	}
	body = binary.AppendUvarint(body, uint64(len(pool)))
	for _, c := range pool {
		id := c.identity
		body = binary.AppendUvarint(body, field(0, id.Org))
		body = binary.AppendUvarint(body, field(1, id.Namespace))
		body = binary.AppendUvarint(body, field(2, id.Agent))
		body = binary.AppendUvarint(body, field(3, id.UserID))
		body = binary.AppendUvarint(body, field(4, id.SessionID))
		body = binary.AppendUvarint(body, field(5, id.MemoryKey))
		body = binary.AppendUvarint(body, field(6, c.memoryType))
		if sha, ok := lowerHex32(c.contentSHA256); ok {
			body = append(append(body, 0), sha[:]...)
		} else {
			body = binary.AppendUvarint(append(body, 1), ref(c.contentSHA256))
		}
		// The legs in the order of their names, as the blob has always listed them.
		body = binary.AppendUvarint(body, uint64(c.scores.count())+1)
		var err error
		c.scores.each(func(l Leg, v float64) {
			body = binary.AppendUvarint(body, ref(string(l)))
			if err == nil {
				err = f64(v)
			}
		})
		if err != nil {
			return nil, err
		}
		for _, f := range []float64{c.coverage, c.fused, c.relevance} {
			if err := f64(f); err != nil {
				return nil, err
			}
		}
	}
	out := binary.AppendUvarint([]byte{packedVersion}, uint64(len(table)))
	for _, s := range table {
		out = append(binary.AppendUvarint(out, uint64(len(s))), s...)
	}
	return append(out, body...), nil
}

// lowerHex32 decodes a hash written as 64 lowercase hex digits (as every content
// hash is); any other string is parked as it is.
func lowerHex32(s string) (out [32]byte, ok bool) {
	if len(s) != 64 {
		return out, false
	}
	var bad byte
	for i := 0; i < 32; i++ {
		hi, lo := lowerHexValue[s[2*i]], lowerHexValue[s[2*i+1]]
		bad |= hi | lo
		out[i] = hi<<4 | lo&0x0f
	}
	return out, bad&0x80 == 0
}

// lowerHexValue is each byte's value as a lowercase hex digit, or 0x80 (a search parks
// some 50,000 digits: a table, not a branch a digit).
var lowerHexValue = func() (t [256]byte) {
	for i := range t {
		t[i] = 0x80
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c-'a') + 10
	}
	return t
}()

var errPacked = errors.New("a packed parked pool is cut short or malformed")

func unpackCandidates(b []byte) ([]*candidate, error) {
	if len(b) == 0 || b[0] != packedVersion {
		return nil, fmt.Errorf("a packed parked pool of an unknown version")
	}
	b = b[1:]
	bad := false
	uv := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			bad = true
			return 0
		}
		b = b[n:]
		return v
	}
	take := func(n uint64) []byte {
		if bad || uint64(len(b)) < n {
			bad = true
			return nil
		}
		out := b[:n]
		b = b[n:]
		return out
	}
	nStr := uv()
	if bad || nStr > uint64(len(b)) {
		return nil, errPacked
	}
	table := make([]string, nStr)
	for i := range table {
		table[i] = string(take(uv()))
	}
	str := func() string {
		i := uv()
		if i >= uint64(len(table)) {
			bad = true
			return ""
		}
		return table[i]
	}
	f64 := func() float64 {
		raw := take(8)
		if raw == nil {
			return 0
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(raw))
	}
	n := uv()
	if bad || n > uint64(len(b)) {
		return nil, errPacked
	}
	pool := make([]*candidate, 0, n)
	for i := uint64(0); i < n && !bad; i++ {
		c := &candidate{identity: memrow.Identity{Org: str(), Namespace: str(), Agent: str(), UserID: str(), SessionID: str(), MemoryKey: str()},
			memoryType: str()}
		if flag := take(1); flag != nil && flag[0] == 0 {
			c.contentSHA256 = hex.EncodeToString(take(32))
		} else {
			c.contentSHA256 = str()
		}
		if legs := uv(); legs > 0 {
			for j := uint64(1); j < legs && !bad; j++ {
				l := Leg(str())
				c.scores.set(l, f64())
			}
		}
		c.coverage, c.fused, c.relevance = f64(), f64(), f64()
		pool = append(pool, c)
	}
	if bad || len(b) != 0 {
		return nil, errPacked
	}
	return pool, nil
}
