package indexfeed

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
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
	scope := checkpointScope{KEKs: [][]byte{[]byte("new-kek1"), []byte("old-kek2")}, MaxBytes: 1 << 30}
	head := checkpointHead{Topic: "loom.revisions", TopicID: [16]byte{7}, Next: map[int32]int64{0: 100, 1: 100, 2: 100, 3: 100}, Written: time.Now(), Scope: scope}
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
	if got.Topic != head.Topic || got.TopicID != head.TopicID || len(got.Next) != 4 || got.Next[3] != 100 || !reflect.DeepEqual(got.Scope, scope) {
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

// A checkpoint is loaded only by a process whose ring holds every KEK its writer opened
// content with, and that keeps the same memory budget; a process that cannot open what
// the checkpoint holds replays the topic instead.
func TestCheckpointScope(t *testing.T) {
	older, newer, other := []byte("kek-old1"), []byte("kek-new1"), []byte("kek-oth1")
	written := checkpointScope{KEKs: [][]byte{older}, MaxBytes: 0}
	for name, loader := range map[string]checkpointScope{
		"the same ring":         {KEKs: [][]byte{older}},
		"a rotation's new,old":  {KEKs: [][]byte{newer, older}},
		"the same ring, copied": {KEKs: [][]byte{[]byte("kek-old1")}},
	} {
		if err := loader.admits(written); err != nil {
			t.Errorf("%s: refused: %v", name, err)
		}
	}
	for name, loader := range map[string]checkpointScope{
		"another KEK":                  {KEKs: [][]byte{other}},
		"the rotation's new KEK alone": {KEKs: [][]byte{newer}},
		"no KEK":                       {},
		"another budget":               {KEKs: [][]byte{older}, MaxBytes: 1},
	} {
		if err := loader.admits(written); err == nil {
			t.Errorf("%s: admitted", name)
		}
	}
	if err := (checkpointScope{KEKs: [][]byte{older}}).admits(checkpointScope{KEKs: [][]byte{newer, older}}); err == nil {
		t.Error("a checkpoint written under new,old admitted by a process holding only old")
	}
}

// Processes that share a checkpoint directory: a start's removal of the temporary files
// a crash left spares one another process is writing, and two writers at once each
// install a whole checkpoint.
func TestCheckpointDirectoryShared(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "index-crashed.tmp"), []byte("left"), 0o600)
	unlock, err := lockDir(dir, syscall.LOCK_SH) // a writer at work
	if err != nil {
		t.Fatal(err)
	}
	writing := filepath.Join(dir, "index-writing.tmp")
	os.WriteFile(writing, []byte("half"), 0o600)
	removeCheckpoints(dir, false)
	if _, err := os.Stat(writing); err != nil {
		t.Fatalf("a start removed the temporary file another process is writing: %v", err)
	}
	unlock()
	removeCheckpoints(dir, false)
	if left, _ := filepath.Glob(filepath.Join(dir, checkpointPattern)); len(left) != 0 {
		t.Fatalf("temporary files left once no one writes: %v", left)
	}

	x := replayed(t, 300)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := writeCheckpoint(dir, checkpointHead{Topic: "t", Next: map[int32]int64{0: int64(i)}}, x)
			errs <- err
			removeCheckpoints(dir, false) // another process starting meanwhile
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a concurrent write failed: %v", err)
		}
	}
	f, _, size, err := openCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	y := searchindex.New(searchindex.Config{})
	if err := y.ReadCheckpoint(f, size); err != nil {
		t.Fatal(err)
	}
	if y.Stats().Entries != 300 {
		t.Fatalf("the checkpoint left by concurrent writers holds %d entries, want 300", y.Stats().Entries)
	}
}
