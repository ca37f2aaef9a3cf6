package command

import (
	"fmt"
	"testing"

	"github.com/loomplane/loom/internal/memrow"
)

func peersOf(n int, cosine func(i int) float64) []peer {
	ps := make([]peer, n)
	for i := range ps {
		ps[i] = peer{row: &memrow.Row{Identity: memrow.Identity{Org: "o", Namespace: "n", Agent: "a", MemoryKey: fmt.Sprintf("k%02d", i)}},
			cosine: cosine(i)}
	}
	return ps
}

// A write's peers come out nearest first, with or without newer rows of their keys; a
// newer row replaces its key's and one no longer a peer (cosine -1) removes it.
func TestMergePeersOverlaysNewerRowsNearestFirst(t *testing.T) {
	base := peersOf(4, func(i int) float64 { return 0.5 + float64(i)/10 })
	keys := func(ps []peer) (out []string) {
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%s:%.2f", p.row.MemoryKey, p.cosine))
		}
		return out
	}
	if got, want := fmt.Sprint(keys(mergePeers(base, nil))), "[k03:0.80 k02:0.70 k01:0.60 k00:0.50]"; got != want {
		t.Errorf("without newer rows: %s, want %s", got, want)
	}
	newer := peersOf(3, func(i int) float64 { return []float64{0.95, -1, 0.1}[i] })
	newer[2].row.MemoryKey = "k09"
	if got, want := fmt.Sprint(keys(mergePeers(base, newer))), "[k00:0.95 k03:0.80 k02:0.70 k09:0.10]"; got != want {
		t.Errorf("with newer rows: %s, want %s", got, want)
	}
}

// BenchmarkMergePeers is a write's peer list (16 peers) merged with no newer rows, as
// most writes are, and with two.
func BenchmarkMergePeers(b *testing.B) {
	base := peersOf(16, func(i int) float64 { return float64(i) / 16 })
	for _, n := range []int{0, 2} {
		newer := peersOf(n, func(i int) float64 { return 0.99 })
		b.Run(fmt.Sprintf("newer=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				mergePeers(base, newer)
			}
		})
	}
}
