package indexfeed

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/loomplane/loom/internal/searchindex"
)

// The checkpoint file: a magic, the file layout's version, the topic it follows (name
// and id) and the next offset of each partition, the scope it was written under (the
// writer's KEK ids and memory budget), the index's own checkpoint
// (searchindex.WriteCheckpoint), and a CRC-32C of everything before it. Format 1 had no
// scope: such a file is refused and the topic replayed.
const (
	checkpointMagic   = "LOOMIDX\n"
	checkpointFormat  = 2
	checkpointFile    = "index.checkpoint"
	checkpointPattern = "index-*.tmp"
	// checkpointLock is held shared by a writer while its temporary file exists, and
	// exclusive by the start that removes the temporary files a crash left: processes
	// that share a directory never remove each other's file mid-write.
	checkpointLock = "index.lock"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkpointHead is where a checkpoint stands on the topic, and what it was written
// under.
type checkpointHead struct {
	Topic   string
	TopicID [16]byte
	Next    map[int32]int64 // the next offset to apply, per partition
	Written time.Time
	Scope   checkpointScope
}

// checkpointScope is what of a follower's configuration decides what its index holds
// beyond the topic's records and offsets: the KEKs its data keys were opened under
// (content a ring opened is in the index), and the memory budget (a namespace evicted
// under it is written evicted, and stays so in the process that loads it). Graphs are
// not written, so the graph settings are not part of it.
type checkpointScope struct {
	KEKs     [][]byte
	MaxBytes int64
}

// admits says why a checkpoint written under scope w must not be loaded by a follower
// of scope s, or nil: each KEK the writer held must be one s holds (else s would serve
// content it cannot open itself), and the budgets must be the same.
func (s checkpointScope) admits(w checkpointScope) error {
	for _, id := range w.KEKs {
		if !slices.ContainsFunc(s.KEKs, func(have []byte) bool { return bytes.Equal(have, id) }) {
			return fmt.Errorf("it was written by a process holding KEK %x, which LOOM_KEK does not list", id)
		}
	}
	if w.MaxBytes != s.MaxBytes {
		return fmt.Errorf("it was written under LOOM_INDEX_MAX_BYTES %d, not %d", w.MaxBytes, s.MaxBytes)
	}
	return nil
}

// writeCheckpoint writes the index and head to dir atomically: a temporary file,
// synced, renamed over the last checkpoint, and the directory synced. It returns the
// file's size.
func writeCheckpoint(dir string, head checkpointHead, x *searchindex.Index) (int64, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("create the index checkpoint directory: %w", err)
	}
	unlock, err := lockDir(dir, syscall.LOCK_SH)
	if err != nil {
		return 0, fmt.Errorf("lock the index checkpoint directory: %w", err)
	}
	defer unlock()
	tmp, err := os.CreateTemp(dir, checkpointPattern)
	if err != nil {
		return 0, fmt.Errorf("create the index checkpoint: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	sum := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(tmp, sum), 1<<20)
	w.WriteString(checkpointMagic)
	w.Write(encodeHead(head))
	if err := x.WriteCheckpoint(w); err != nil {
		return 0, err
	}
	if err := w.Flush(); err != nil {
		return 0, fmt.Errorf("write the index checkpoint: %w", err)
	}
	if _, err := tmp.Write(binary.LittleEndian.AppendUint32(nil, sum.Sum32())); err != nil {
		return 0, fmt.Errorf("write the index checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return 0, fmt.Errorf("sync the index checkpoint: %w", err)
	}
	info, err := tmp.Stat()
	if err != nil {
		return 0, fmt.Errorf("write the index checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return 0, fmt.Errorf("write the index checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, checkpointFile)); err != nil {
		return 0, fmt.Errorf("install the index checkpoint: %w", err)
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return info.Size(), nil
}

func encodeHead(h checkpointHead) []byte {
	b := binary.AppendUvarint(nil, checkpointFormat)
	b = binary.AppendUvarint(b, uint64(len(h.Topic)))
	b = append(b, h.Topic...)
	b = append(b, h.TopicID[:]...)
	b = binary.AppendVarint(b, h.Written.UnixNano())
	parts := make([]int32, 0, len(h.Next))
	for p := range h.Next {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	b = binary.AppendUvarint(b, uint64(len(parts)))
	for _, p := range parts {
		b = binary.AppendVarint(b, int64(p))
		b = binary.AppendVarint(b, h.Next[p])
	}
	b = binary.AppendUvarint(b, uint64(len(h.Scope.KEKs)))
	for _, id := range h.Scope.KEKs {
		b = binary.AppendUvarint(b, uint64(len(id)))
		b = append(b, id...)
	}
	return binary.AppendVarint(b, h.Scope.MaxBytes)
}

// errNoCheckpoint: the directory holds none.
var errNoCheckpoint = errors.New("no checkpoint")

// openCheckpoint checks a checkpoint's checksum (a first pass over the file) and reads
// its head, returning the file positioned at the index's part and that part's length.
func openCheckpoint(dir string) (*os.File, checkpointHead, int64, error) {
	var head checkpointHead
	f, err := os.Open(filepath.Join(dir, checkpointFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, head, 0, errNoCheckpoint
	}
	if err != nil {
		return nil, head, 0, err
	}
	fail := func(err error) (*os.File, checkpointHead, int64, error) {
		f.Close()
		return nil, head, 0, err
	}
	info, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	size := info.Size() - 4
	if size < int64(len(checkpointMagic)) {
		return fail(errors.New("the file is truncated"))
	}
	sum := crc32.New(castagnoli)
	if _, err := io.CopyN(sum, f, size); err != nil {
		return fail(fmt.Errorf("read: %w", err))
	}
	var stored [4]byte
	if _, err := io.ReadFull(f, stored[:]); err != nil {
		return fail(fmt.Errorf("read: %w", err))
	}
	if binary.LittleEndian.Uint32(stored[:]) != sum.Sum32() {
		return fail(errors.New("its checksum does not match: the file is damaged or truncated"))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	// The head is small: read a generous prefix, parse it, and seek past it.
	prefix := make([]byte, min(size, 1<<20))
	if _, err := io.ReadFull(f, prefix); err != nil {
		return fail(fmt.Errorf("read: %w", err))
	}
	if !bytes.HasPrefix(prefix, []byte(checkpointMagic)) {
		return fail(errors.New("it is not an index checkpoint"))
	}
	r := bytes.NewReader(prefix[len(checkpointMagic):])
	if head, err = decodeHead(r); err != nil {
		return fail(err)
	}
	bodyAt := int64(len(prefix)) - int64(r.Len())
	if _, err := f.Seek(bodyAt, io.SeekStart); err != nil {
		return fail(err)
	}
	return f, head, size - bodyAt, nil
}

func decodeHead(r *bytes.Reader) (checkpointHead, error) {
	h := checkpointHead{Next: map[int32]int64{}}
	var err error
	uv := func() uint64 {
		v, e := binary.ReadUvarint(r)
		err = errors.Join(err, e)
		return v
	}
	sv := func() int64 {
		v, e := binary.ReadVarint(r)
		err = errors.Join(err, e)
		return v
	}
	if v := uv(); err == nil && v != checkpointFormat {
		return h, fmt.Errorf("%w: file format %d, this build reads %d", searchindex.ErrCheckpointVersion, v, checkpointFormat)
	}
	topic := make([]byte, min(uv(), uint64(r.Len())))
	_, e := io.ReadFull(r, topic)
	_, e2 := io.ReadFull(r, h.TopicID[:])
	h.Topic, h.Written = string(topic), time.Unix(0, sv())
	for n := min(uv(), uint64(r.Len())); n > 0 && err == nil; n-- {
		p := int32(sv())
		h.Next[p] = sv()
	}
	for n := min(uv(), uint64(r.Len())); n > 0 && err == nil; n-- {
		id := make([]byte, min(uv(), uint64(r.Len())))
		_, e := io.ReadFull(r, id)
		err = errors.Join(err, e)
		h.Scope.KEKs = append(h.Scope.KEKs, id)
	}
	h.Scope.MaxBytes = sv()
	if err = errors.Join(err, e, e2); err != nil {
		return h, fmt.Errorf("read its head: %w", err)
	}
	return h, nil
}

// usable says why a checkpoint cannot be resumed from on the topic as it stands (starts
// and ends are its partitions' log start and end offsets), or nil.
func (h checkpointHead) usable(topic string, topicID [16]byte, starts, ends map[int32]int64) error {
	if h.Topic != topic {
		return fmt.Errorf("it follows topic %s, not %s", h.Topic, topic)
	}
	if h.TopicID != ([16]byte{}) && topicID != ([16]byte{}) && h.TopicID != topicID {
		return fmt.Errorf("topic %s was recreated since it was written", topic)
	}
	for p, next := range h.Next {
		start, ok := starts[p]
		switch {
		case !ok:
			return fmt.Errorf("partition %d is no longer on topic %s (recreated?)", p, topic)
		case next > ends[p]:
			return fmt.Errorf("partition %d: its offset %d is past the end of the log (%d): the topic was recreated", p, next, ends[p])
		case next < start:
			return fmt.Errorf("partition %d: its offset %d is before the log's start (%d): retention removed records it needs", p, next, start)
		}
	}
	return nil
}

// removeCheckpoints deletes a checkpoint that will not be used (it may hold what was
// erased since) and temporary files a crash left; not while another process sharing
// the directory writes one (it removes its own if it fails).
func removeCheckpoints(dir string, final bool) {
	if final {
		os.Remove(filepath.Join(dir, checkpointFile))
	}
	unlock, err := lockDir(dir, syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		return
	}
	defer unlock()
	left, _ := filepath.Glob(filepath.Join(dir, checkpointPattern))
	for _, f := range left {
		os.Remove(f)
	}
}

// lockDir takes the directory's lock file (flock, how) and returns its release.
func lockDir(dir string, how int) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, checkpointLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
