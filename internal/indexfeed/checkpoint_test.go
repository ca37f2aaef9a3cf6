package indexfeed

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loomplane/loom/internal/revisions"
	"github.com/loomplane/loom/internal/searchindex"
)

func replayed(t *testing.T, n int) *searchindex.Index {
	t.Helper()
	recs, keys := sealedTopic(t, n)
	x := searchindex.New(searchindex.Config{})
	decodeBatch(recs, func(*kgo.Record, error) { t.Fatal("undecodable") }).applyTo(x, keys, func(revisions.Unopened) { t.Fatal("unopened") })
	return x
}

// A checkpoint file loads back to the index and offsets written; a damaged one, one of
// another format, and one that does not fit the topic as it stands are refused.
func TestCheckpointFile(t *testing.T) {
	dir := t.TempDir()
	x := replayed(t, 400)
	head := checkpointHead{Topic: "loom.revisions", TopicID: [16]byte{7}, Next: map[int32]int64{0: 100, 1: 100, 2: 100, 3: 100}, Written: time.Now()}
	if _, err := writeCheckpoint(dir, head, x); err != nil {
		t.Fatal(err)
	}
	f, got, size, err := openCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	y := searchindex.New(searchindex.Config{})
	if err := y.ReadCheckpoint(f, size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got.Topic != head.Topic || got.TopicID != head.TopicID || len(got.Next) != 4 || got.Next[3] != 100 {
		t.Fatalf("head %+v, wrote %+v", got, head)
	}
	if a, b := x.Stats(), y.Stats(); a.Entries != b.Entries || a.Vectors != b.Vectors || a.Entries != 400 {
		t.Fatalf("loaded %d entries %d vectors, wrote %d %d", b.Entries, b.Vectors, a.Entries, a.Vectors)
	}

	starts, ends := map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0}, map[int32]int64{0: 150, 1: 100, 2: 120, 3: 100}
	if err := got.usable("loom.revisions", [16]byte{7}, starts, ends); err != nil {
		t.Fatalf("a fitting checkpoint refused: %v", err)
	}
	for name, refuse := range map[string]func() error{
		"another topic":  func() error { return got.usable("other", [16]byte{7}, starts, ends) },
		"recreated (id)": func() error { return got.usable("loom.revisions", [16]byte{8}, starts, ends) },
		"past the end": func() error {
			return got.usable("loom.revisions", [16]byte{7}, starts, map[int32]int64{0: 150, 1: 99, 2: 120, 3: 100})
		},
		"before the start": func() error {
			return got.usable("loom.revisions", [16]byte{7}, map[int32]int64{0: 0, 1: 101, 2: 0, 3: 0}, ends)
		},
		"a partition gone": func() error { return got.usable("loom.revisions", [16]byte{7}, map[int32]int64{0: 0}, ends) },
	} {
		if err := refuse(); err == nil {
			t.Errorf("%s: usable", name)
		}
	}

	path := filepath.Join(dir, checkpointFile)
	good, _ := os.ReadFile(path)
	for name, b := range map[string][]byte{
		"a flipped byte": func() []byte { b := append([]byte(nil), good...); b[len(b)/2] ^= 1; return b }(),
		"truncated":      good[:len(good)-100],
		"empty":          {},
	} {
		os.WriteFile(path, b, 0o600)
		if f, _, _, err := openCheckpoint(dir); err == nil {
			f.Close()
			t.Errorf("%s: opened", name)
		} else if !strings.Contains(err.Error(), "checksum") && !strings.Contains(err.Error(), "truncated") {
			t.Errorf("%s: %v", name, err)
		}
	}
	os.Remove(path)
	if _, _, _, err := openCheckpoint(dir); !errors.Is(err, errNoCheckpoint) {
		t.Fatalf("no file: %v", err)
	}
}
