package searchindex

import (
	"errors"
	"time"
)

// Space names one namespace's index.
type Space struct{ Org, Namespace string }

func (s Space) String() string { return s.Org + "/" + s.Namespace }

// Identity is a memory's key within its namespace.
type Identity struct{ Agent, UserID, SessionID, MemoryKey string }

// Revision is what the index applies of one committed revision: its plain fields and,
// unless Sealed, its opened content. Times are kept to the second, as ClickHouse keeps
// them.
type Revision struct {
	Seq                      int64
	MemoryID                 string
	Version                  int64
	Agent, UserID, SessionID string
	MemoryType, Status       string
	Sensitivity              string
	Tombstone, Pinned        bool
	ContentSHA256            string
	ExpiresAt, ValidTo       *time.Time
	UpdatedAt                time.Time
	// EmbeddingDim is what the revision declares: a copy (a pin, a status mark) declares
	// its content's dimension but carries no vector, and keeps the vector the index holds
	// for the same content.
	EmbeddingDim int
	// Sealed: the revision's data key is gone (redacted or erased), so nothing of its
	// content, the key included, can be read. It retires the content the index holds for
	// its memory_id at an older version.
	Sealed bool

	// The content, when not Sealed.
	MemoryKey    string
	Text         string // the value's text (memrow.ValueText)
	Tags         []string
	Vector       []float32   // L2-normalised
	ChunkVectors [][]float32 // the vectors of text.Chunks(Text), in order
}

// Fence is an erasure's part in one namespace: every row of the scope (the namespace,
// or UserID's rows) below Seq, the erasure's own seq.
type Fence struct {
	UserID string // "" for the whole namespace
	Seq    int64
}

// Redaction names the versions of a memory whose text was scrubbed.
type Redaction struct {
	MemoryID string
	Versions []int64
}

// Record is one record of a namespace's stream: a revision, an erasure, a redaction, or
// none of them (a parked placeholder), which only takes its seq.
type Record struct {
	Seq       int64
	Revision  *Revision
	Erasure   *Fence
	Redaction *Redaction
	// Jump marks an erasure's seq (Erasure set or not: a record older than the fence
	// field carries none): it moves the position over the seqs the erasure withdrew.
	Jump bool
}

// Filter narrows a search the way the ClickHouse legs' predicates do. Empty fields do
// not narrow; Statuses must list what is served.
type Filter struct {
	Agent, UserID, SessionID string
	// OrUserID, with UserID or SessionID, lets that user's rows pass them too (the
	// promoted rows, which are in every user's and every session's read scope).
	OrUserID   string
	MemoryType string
	Tags       []string
	TagsAny    bool
	Statuses   []string
	// Now judges expiry; ValidAt judges validity (zero: Now), as a search's as_of does.
	Now, ValidAt time.Time
}

// Query is one namespace's part of a search: every leg over one filter.
type Query struct {
	Filter Filter
	Vector []float32 // the query's embedding, L2-normalised; nil skips the vector legs
	Text   string    // the query as written: the key leg matches a key verbatim
	Terms  []string  // the query's index terms (text.Terms), deduplicated
	Limit  int       // hits per leg
	K1, B  float64   // BM25
}

// Hit is one row a leg found.
type Hit struct {
	Identity
	ContentSHA256 string
	MemoryType    string
	Score         float64 // a cosine, a BM25 score, a key match
	Coverage      float64 // lexical: the share of the query's idf the row's terms hold
}

// Legs are a query's hits, each leg ranked best first.
type Legs struct{ Vector, Chunk, Lexical, Key []Hit }

// PeerQuery is memory.set's peer read: served rows of one type under another key,
// nearest the write's value, in the writer's read scope unless pinned.
type PeerQuery struct {
	MemoryType string
	MemoryKey  string // the write's key: no row under it is a peer
	ReadUserID string // a token bound to one user: that user's rows, and pinned rows of anyone
	Vector     []float32
	Limit      int
	Now        time.Time
}

// Peer is a row the peer read found.
type Peer struct {
	Identity
	MemoryID      string
	ContentSHA256 string
	Cosine        float64
}

// ErrNotHeld says the index does not hold a namespace's content (it was evicted to keep
// within the memory budget): read it from ClickHouse.
var ErrNotHeld = errors.New("searchindex: the namespace is not held in memory")
