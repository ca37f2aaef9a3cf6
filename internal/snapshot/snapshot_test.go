package snapshot

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/memrow"
)

func payload(t *testing.T, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := NewWriter(&b, Header{Kind: KindSnapshot, Format: Format, SnapshotID: "s", Org: "o", Namespace: "n", TakenAt: time.Unix(1, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		row := &memrow.Row{Identity: memrow.Identity{Org: "o", Namespace: "n", MemoryKey: strings.Repeat("k", i+1)}, Value: []byte(`"<v>&"`)}
		if err := w.Write(Memory{Kind: KindMemory, Row: row}); err != nil {
			t.Fatal(err)
		}
	}
	if end, err := w.Close(); err != nil || end.Rows != int64(n) {
		t.Fatalf("end %+v, %v", end, err)
	}
	return b.Bytes()
}

func readAll(raw []byte) ([]*memrow.Row, error) {
	rd, err := NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	var rows []*memrow.Row
	for {
		r, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return rows, err
		}
		rows = append(rows, r.Memory)
	}
}

func TestAPayloadReadsBackAndRefusesWhatWasCutOrEdited(t *testing.T) {
	raw := payload(t, 3)
	rows, err := readAll(raw)
	if err != nil || len(rows) != 3 || rows[2].MemoryKey != "kkk" || string(rows[0].Value) != `"<v>&"` {
		t.Fatalf("read back %d rows, %v", len(rows), err)
	}
	lines := strings.SplitAfter(string(raw), "\n")
	for name, bad := range map[string]string{
		"cut before the end line": strings.Join(lines[:3], ""),
		"a line dropped":          lines[0] + lines[1] + lines[3] + lines[4],
		"a value edited":          strings.Replace(string(raw), "kk", "kx", 1),
		"data after the end":      string(raw) + lines[1],
		"not a snapshot":          `{"kind":"export"}` + "\n",
		"empty":                   "",
	} {
		if _, err := readAll([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}
