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
}

// Memory is one memory of a snapshot: its head, every field a restore needs.
type Memory struct {
	Kind string      `json:"kind"`
	Row  *memrow.Row `json:"row"`
}

// End is the last line of a payload.
type End struct {
	Kind   string `json:"kind"`
	Rows   int64  `json:"rows"`   // the memory lines before it
	SHA256 string `json:"sha256"` // of every byte before this line, newlines included
}

// Writer writes a payload: the header, the lines, then Close writes the end line.
type Writer struct {
	w    io.Writer
	h    hash.Hash
	rows int64
	buf  bytes.Buffer
}

// NewWriter writes header as the first line of a payload on w.
func NewWriter(w io.Writer, header any) (*Writer, error) {
	sw := &Writer{w: w, h: sha256.New()}
	return sw, sw.line(header, false)
}

// Write writes one memory line (any JSON object whose kind is KindMemory).
func (sw *Writer) Write(v any) error { return sw.line(v, true) }

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
	end := End{Kind: KindEnd, Rows: sw.rows, SHA256: hex.EncodeToString(sw.h.Sum(nil))}
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
	sc     *bufio.Scanner
	h      hash.Hash
	line   int
	rows   int64
	Header Header
	End    *End // set once the end line was read and matched
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

// Next returns the next memory; io.EOF once the end line was read and it matches the
// lines before it. A payload that ends without that line is malformed.
func (rd *Reader) Next() (*memrow.Row, error) {
	if rd.End != nil {
		return nil, io.EOF
	}
	raw, err := rd.next()
	if errors.Is(err, io.EOF) {
		return nil, rd.malformed("the payload ends before its end line: it was cut short")
	}
	if err != nil {
		return nil, err
	}
	var kind struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &kind); err != nil {
		return nil, rd.malformed("not a JSON object")
	}
	switch kind.Kind {
	case KindMemory:
		// A row a newer build wrote may carry fields this one does not know.
		var m Memory
		if err := json.Unmarshal(raw, &m); err != nil || m.Row == nil {
			return nil, rd.malformed("not a memory line")
		}
		rd.hashLine(raw)
		rd.rows++
		return m.Row, nil
	case KindEnd:
		var end End
		if err := strictDecode(raw, &end); err != nil {
			return nil, rd.malformed("not an end line")
		}
		if end.Rows != rd.rows || end.SHA256 != hex.EncodeToString(rd.h.Sum(nil)) {
			return nil, rd.malformed(fmt.Sprintf("the end line counts %d memories and a digest the %d lines before it do not match: the payload was edited", end.Rows, rd.rows))
		}
		if rd.sc.Scan() {
			return nil, rd.malformed("data after the end line")
		}
		rd.End = &end
		return nil, io.EOF
	}
	return nil, rd.malformed(fmt.Sprintf("unknown line kind %q", kind.Kind))
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
