// Package snapshot is the portable form of memory that leaves Loom in bulk: JSON
// Lines, a header line first, one line per memory, and an end line that counts the
// memory lines and carries the SHA-256 of every byte before it, so a reader tells a
// complete payload from a cut or edited one before it acts on any of it. A namespace
// snapshot (namespace.snapshot, read back by namespace.restore) and a subject-access
// export (erasure.export) are written in it.
package snapshot

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/loomplane/loom/internal/learnings"
	"github.com/loomplane/loom/internal/memrow"
)

// Format names a namespace snapshot's layout in its header.
const Format = "loom.snapshot.v1"

// Line kinds.
const (
	KindSnapshot = "snapshot" // a namespace snapshot's header
	KindExport   = "export"   // a subject-access export's header
	KindMemory   = "memory"   // one memory
	KindEnd      = "end"      // the last line
	// The conversation's record: a namespace's kept turns and its sessions' newest
	// digests, after its memories.
	KindTurn   = "turn"
	KindDigest = "digest"
	// KindLearning is a rule about the agent in the learnings queue, after the
	// digests: a namespace snapshot's every candidate with all its supporters, a
	// subject-access export's those the user supports, with that user's alone.
	KindLearning = "learning"
)

// MaxLine bounds one line a Reader takes: a memory's value is bounded by the char
// limit, far below it.
const MaxLine = 16 << 20

// Header is a namespace snapshot's first line.
type Header struct {
	Kind       string    `json:"kind"`
	Format     string    `json:"format"`
	SnapshotID string    `json:"snapshot_id"`
	Org        string    `json:"org"`
	Namespace  string    `json:"namespace"`
	Generation int64     `json:"generation"` // the namespace's generation the heads were read at
	TakenAt    time.Time `json:"taken_at"`
	// Config and Blacklist are the namespace's write policy at the snapshot: a
	// restore into a namespace with none creates it with them.
	Config    json.RawMessage `json:"config,omitempty"`
	Blacklist []string        `json:"blacklist"`
	// Allowlist is the namespace's conflict allowlist at the snapshot, each pair's two
	// memory ids in order: a restore lists again the pairs whose rows it holds live.
	Allowlist [][2]string `json:"allowlist,omitempty"`
}

// Memory is one memory of a snapshot: its head, every field a restore needs.
type Memory struct {
	Kind string      `json:"kind"`
	Row  *memrow.Row `json:"row"`
}

// Turn is one kept turn of a snapshot, its text open as a memory's value is, and the
// memories drawn from it (their belief sources).
type Turn struct {
	Kind         string    `json:"kind"`
	TurnID       string    `json:"turn_id"`
	Agent        string    `json:"agent"`
	UserID       string    `json:"user_id"`
	SessionID    string    `json:"session_id"`
	Role         string    `json:"role"`
	Speaker      string    `json:"speaker,omitempty"`
	MessageIndex int       `json:"message_index"`
	OccurredAt   time.Time `json:"occurred_at"`
	Source       string    `json:"source"`
	Text         string    `json:"text"`
	MemoryIDs    []string  `json:"memory_ids,omitempty"`
}

// Digest is a session's newest digest: up to the turn at WindowEnd, over Turns turns.
type Digest struct {
	Kind      string    `json:"kind"`
	UserID    string    `json:"user_id"`
	SessionID string    `json:"session_id"`
	WindowEnd int       `json:"window_end"`
	Turns     int       `json:"turns"`
	Model     string    `json:"model"`
	CreatedAt time.Time `json:"created_at"`
	Text      string    `json:"text"`
}

// Learning is one candidate of the learnings queue, its texts open as a turn's are,
// with its supporters and their quotes.
type Learning struct {
	Kind string `json:"kind"`
	learnings.Opened
}

// Line is one line a Reader read: exactly one field is set.
type Line struct {
	Memory   *memrow.Row
	Turn     *Turn
	Digest   *Digest
	Learning *Learning
}

// End is the last line of a payload.
type End struct {
	Kind    string `json:"kind"`
	Rows    int64  `json:"rows"`              // the memory lines before it
	Records int64  `json:"records,omitempty"` // the turn, digest and learning lines before it
	SHA256  string `json:"sha256"`            // of every byte before this line, newlines included
}

// Writer writes a payload: the header, the lines, then Close writes the end line.
type Writer struct {
	w       io.Writer
	h       hash.Hash
	rows    int64
	records int64
	buf     bytes.Buffer
}

// NewWriter writes header as the first line of a payload on w.
func NewWriter(w io.Writer, header any) (*Writer, error) {
	sw := &Writer{w: w, h: sha256.New()}
	return sw, sw.line(header, false)
}

// Write writes one memory line (any JSON object whose kind is KindMemory).
func (sw *Writer) Write(v any) error { return sw.line(v, true) }

// WriteRecord writes a line of the conversation's record (a Turn, a Digest or a
// Learning), which the end line counts apart from the memories.
func (sw *Writer) WriteRecord(v any) error {
	if err := sw.line(v, false); err != nil {
		return err
	}
	sw.records++
	return nil
}

func (sw *Writer) line(v any, counted bool) error {
	sw.buf.Reset()
	enc := json.NewEncoder(&sw.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode a line: %w", err)
	}
	sw.h.Write(sw.buf.Bytes())
	if _, err := sw.w.Write(sw.buf.Bytes()); err != nil {
		return err
	}
	if counted {
		sw.rows++
	}
	return nil
}

// Close writes the end line and returns it. It does not close the underlying writer.
func (sw *Writer) Close() (End, error) {
	end := End{Kind: KindEnd, Rows: sw.rows, Records: sw.records, SHA256: hex.EncodeToString(sw.h.Sum(nil))}
	sw.buf.Reset()
	enc := json.NewEncoder(&sw.buf)
	if err := enc.Encode(end); err != nil {
		return end, err
	}
	_, err := sw.w.Write(sw.buf.Bytes())
	return end, err
}

// ErrMalformed is a payload a Reader refuses: not a snapshot, cut short, edited, or
// with a line that is not what its kind says.
var ErrMalformed = errors.New("snapshot: malformed payload")

// Reader reads a namespace snapshot, line by line, checking as it goes.
type Reader struct {
	sc      *bufio.Scanner
	h       hash.Hash
	line    int
	rows    int64
	records int64
	Header  Header
	End     *End // set once the end line was read and matched
}

// NewReader reads and checks a snapshot's header.
func NewReader(r io.Reader) (*Reader, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLine)
	rd := &Reader{sc: sc, h: sha256.New()}
	raw, err := rd.next()
	if errors.Is(err, io.EOF) {
		return nil, rd.malformed("the payload is empty")
	}
	if err != nil {
		return nil, err
	}
	if err := strictDecode(raw, &rd.Header); err != nil || rd.Header.Kind != KindSnapshot {
		return nil, rd.malformed("the first line is not a snapshot header")
	}
	if rd.Header.Format != Format {
		return nil, rd.malformed(fmt.Sprintf("format %q, want %s", rd.Header.Format, Format))
	}
	rd.hashLine(raw)
	return rd, nil
}

// Next returns the next line; io.EOF once the end line was read and it matches the
// lines before it. A payload that ends without that line is malformed.
func (rd *Reader) Next() (Line, error) {
	if rd.End != nil {
		return Line{}, io.EOF
	}
	raw, err := rd.next()
	if errors.Is(err, io.EOF) {
		return Line{}, rd.malformed("the payload ends before its end line: it was cut short")
	}
	if err != nil {
		return Line{}, err
	}
	var kind struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &kind); err != nil {
		return Line{}, rd.malformed("not a JSON object")
	}
	switch kind.Kind {
	case KindMemory:
		// A row a newer build wrote may carry fields this one does not know.
		var m Memory
		if err := json.Unmarshal(raw, &m); err != nil || m.Row == nil {
			return Line{}, rd.malformed("not a memory line")
		}
		rd.hashLine(raw)
		rd.rows++
		return Line{Memory: m.Row}, nil
	case KindTurn:
		var t Turn
		if err := json.Unmarshal(raw, &t); err != nil {
			return Line{}, rd.malformed("not a turn line")
		}
		rd.hashLine(raw)
		rd.records++
		return Line{Turn: &t}, nil
	case KindDigest:
		var d Digest
		if err := json.Unmarshal(raw, &d); err != nil {
			return Line{}, rd.malformed("not a digest line")
		}
		rd.hashLine(raw)
		rd.records++
		return Line{Digest: &d}, nil
	case KindLearning:
		var l Learning
		if err := json.Unmarshal(raw, &l); err != nil {
			return Line{}, rd.malformed("not a learning line")
		}
		rd.hashLine(raw)
		rd.records++
		return Line{Learning: &l}, nil
	case KindEnd:
		var end End
		if err := strictDecode(raw, &end); err != nil {
			return Line{}, rd.malformed("not an end line")
		}
		if end.Rows != rd.rows || end.Records != rd.records || end.SHA256 != hex.EncodeToString(rd.h.Sum(nil)) {
			return Line{}, rd.malformed(fmt.Sprintf("the end line counts %d memories and %d turns, digests and learnings, and a digest the %d and %d lines before it do not match: the payload was edited",
				end.Rows, end.Records, rd.rows, rd.records))
		}
		if rd.sc.Scan() {
			return Line{}, rd.malformed("data after the end line")
		}
		rd.End = &end
		return Line{}, io.EOF
	}
	return Line{}, rd.malformed(fmt.Sprintf("unknown line kind %q", kind.Kind))
}

func (rd *Reader) next() ([]byte, error) {
	if !rd.sc.Scan() {
		if err := rd.sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				return nil, rd.malformed(fmt.Sprintf("a line is longer than %d bytes", MaxLine))
			}
			return nil, fmt.Errorf("read the snapshot: %w", err)
		}
		return nil, io.EOF
	}
	rd.line++
	return rd.sc.Bytes(), nil
}

func (rd *Reader) hashLine(raw []byte) {
	rd.h.Write(raw)
	rd.h.Write([]byte{'\n'})
}

func (rd *Reader) malformed(why string) error {
	return fmt.Errorf("%w: line %d: %s", ErrMalformed, rd.line, why)
}

func strictDecode(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
