package text

import (
	"reflect"
	"slices"
	"testing"
)

func TestStemMergesInflections(t *testing.T) {
	groups := [][]string{
		{"prefers", "preferred", "preferring", "prefer"},
		{"stops", "stopped", "stopping", "stop"},
		{"cities", "city"},
		{"boxes", "box"},
		{"meetings", "meeting"},
		{"researched", "researching", "researches", "research"},
		{"studying", "studies", "studied", "study"},
		{"based", "bases", "base"},
	}
	for _, g := range groups {
		want := Stem(g[len(g)-1])
		for _, w := range g {
			if got := Stem(w); got != want {
				t.Errorf("Stem(%q) = %q, want %q (as %q)", w, got, want, g[len(g)-1])
			}
		}
	}
	for _, w := range []string{"bus", "class", "2026", "gas", "bg95", "kraków", "an"} {
		if got := Stem(w); got != w {
			t.Errorf("Stem(%q) = %q, want it unchanged", w, got)
		}
	}
}

func TestTermsDropStopwords(t *testing.T) {
	got := Terms("The user PREFERS dark-mode in the editors")
	want := []string{"user", "prefer", "dark", "mode", "editor"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Terms = %v, want %v", got, want)
	}
}

func TestTermFreqsCountEachTermOnceInOrder(t *testing.T) {
	terms, tfs, n := TermFreqs("Editors prefer the dark editor; the user prefers dark mode, dark")
	if want := []string{"dark", "editor", "mode", "prefer", "user"}; !reflect.DeepEqual(terms, want) {
		t.Fatalf("terms = %v, want %v", terms, want)
	}
	if want := []uint16{3, 2, 1, 2, 1}; !reflect.DeepEqual(tfs, want) {
		t.Fatalf("counts = %v, want %v", tfs, want)
	}
	if n != 9 {
		t.Fatalf("length = %d terms, want 9", n)
	}
	if terms, tfs, n := TermFreqs("the and of"); terms == nil || tfs == nil || len(terms)+len(tfs)+int(n) != 0 {
		t.Fatalf("a text of stopwords: %#v %#v %d, want empty, not nil", terms, tfs, n)
	}
}

func TestChunksCoverALongTextInOverlappingWindows(t *testing.T) {
	if Chunks("short") != nil {
		t.Fatal("a short text has no chunks")
	}
	var long string
	for i := 0; i < 400; i++ {
		long += "word" + string(rune('a'+i%26)) + " "
	}
	cs := Chunks(long)
	if len(cs) < 3 || len(cs) > MaxChunks {
		t.Fatalf("%d chunks", len(cs))
	}
	for i, c := range cs {
		if len([]rune(c)) > ChunkSize {
			t.Fatalf("chunk %d has %d runes", i, len([]rune(c)))
		}
	}
	// Every word of the text is in some chunk.
	all := ""
	for _, c := range cs {
		all += " " + c + " "
	}
	for _, w := range Words(long) {
		if !contains(all, w) {
			t.Fatalf("word %q in no chunk", w)
		}
	}
	if !reflect.DeepEqual(Chunks(long), cs) {
		t.Fatal("chunking is not deterministic")
	}
}

func contains(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if s[i:i+len(w)] == w {
			return true
		}
	}
	return false
}

func TestStemsMemoAgreesWithStem(t *testing.T) {
	m := NewStems(3)
	for _, s := range []string{"Researchers researched the cities", "the researching city", "Editors prefer dark editors", "café 2024 ok"} {
		for range 2 {
			if got, want := m.Terms(s), Terms(s); !slices.Equal(got, want) {
				t.Fatalf("Stems.Terms(%q) = %v, want %v", s, got, want)
			}
			gt, gf, gn := m.TermFreqs(s)
			wt, wf, wn := TermFreqs(s)
			if !slices.Equal(gt, wt) || !slices.Equal(gf, wf) || gn != wn {
				t.Fatalf("Stems.TermFreqs(%q) = %v %v %d, want %v %v %d", s, gt, gf, gn, wt, wf, wn)
			}
		}
	}
	if len(m.stems) > 3 {
		t.Fatalf("the memo holds %d words, past its limit of 3", len(m.stems))
	}
}
