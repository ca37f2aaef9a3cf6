package query

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// randomText is up to n words drawn from a mix of scripts, digits, punctuation and
// line breaks, the kinds of text whose tokens do not add up across a join.
func randomText(r *rand.Rand, n int) string {
	words := []string{"the", "user", "prefers", "tea", "Berlin", "2026-03-01", "€42.50", "お誕生日", "naïve", "x", "\n", "  ", "::", "{\"a\":1}",
		"antidisestablishmentarianism", "🙂", "Ω", "—", "lives", "in", "Zürich", "since", "1999", "[m:1@2]", "#", "-", "\t"}
	var b strings.Builder
	for range r.IntN(n + 1) {
		b.WriteString(words[r.IntN(len(words))])
		if r.IntN(3) > 0 {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// No pack exceeds its budget, counted over the block as rendered, under random
// budgets, caps, contents and both renderings; and the same input packs to the same
// bytes.
func TestPackNeverExceedsBudget(t *testing.T) {
	for _, enc := range []string{"o200k_base", "cl100k_base"} {
		tok, err := newTokenizers(0).For(enc, "")
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(30, uint64(len(enc))))
		for trial := range 150 {
			var sections []packSection
			for _, name := range packPriority {
				s := packSection{Name: name, Available: true}
				for j := range r.IntN(12) {
					s.Lines = append(s.Lines, packLine{Cite: fmt.Sprintf("m:%d@%d", r.IntN(20), j), Text: randomText(r, 40),
						key: fmt.Sprintf("k%d", r.IntN(6)), session: fmt.Sprintf("s%d", r.IntN(3))})
				}
				sections = append(sections, s)
			}
			lim := packLimits{Budget: minPackBudget + r.IntN(600), PerKey: r.IntN(4), PerSession: r.IntN(8)}
			format := formatMarkdown
			if trial%2 == 1 {
				format = formatJSON
			}
			kept, cuts, block, tokens := fitPack(sections, lim, format, tok.Count)
			if got := tok.Count(block); got != tokens || tokens > lim.Budget {
				t.Fatalf("%s trial %d: block of %d tokens (reported %d) over a budget of %d:\n%s", enc, trial, got, tokens, lim.Budget, block)
			}
			in, out := 0, len(cuts)
			for i := range sections {
				in += len(sections[i].Lines)
				out += len(kept[i].Lines)
			}
			if in != out {
				t.Fatalf("%s trial %d: %d lines in, %d kept or cut", enc, trial, in, out)
			}
			_, _, again, _ := fitPack(sections, lim, format, tok.Count)
			if again != block {
				t.Fatalf("%s trial %d: the same input packed to different bytes", enc, trial)
			}
		}
	}
}

// The caps cut what they name, and say so.
func TestPackCaps(t *testing.T) {
	tok, _ := newTokenizers(0).For("", "")
	facts := packSection{Name: sectionFacts, Available: true, Lines: []packLine{
		{Cite: "m:a@1", Text: "one", key: "k", session: "s"},
		{Cite: "m:a@1", Text: "one again", key: "k2", session: "s2"},
		{Cite: "m:b@1", Text: "two", key: "k", session: "s"},
		{Cite: "m:c@1", Text: "three", key: "k3", session: "s"},
		{Cite: "m:d@1", Text: strings.Repeat("long ", 200), key: "k4", session: "s4"},
		{Cite: "m:e@1", Text: "five", key: "k5", session: "s5"},
	}}
	kept, cuts, block, _ := fitPack([]packSection{facts}, packLimits{Budget: 60, PerKey: 1, PerSession: 2}, formatMarkdown, tok.Count)
	var cites []string
	for _, l := range kept[0].Lines {
		cites = append(cites, l.Cite)
	}
	reasons := map[string]string{}
	for _, c := range cuts {
		reasons[c.Cite] = c.Reason
	}
	if strings.Join(cites, ",") != "m:a@1,m:c@1,m:e@1" || reasons["m:b@1"] != cutPerKey || reasons["m:d@1"] != cutBudget {
		t.Fatalf("kept %v, cut %v:\n%s", cites, cuts, block)
	}
	if !strings.HasPrefix(block, "## Relevant facts\n- [m:a@1] one\n") {
		t.Fatalf("block:\n%s", block)
	}
}

// A profile's lines all cite its row's version, one line per field or statement: the
// pack keeps each of them, where two lines of another layer citing one version are a
// duplicate.
func TestPackKeepsEveryLineOfAProfile(t *testing.T) {
	tok, _ := newTokenizers(0).For("", "")
	profile := packSection{Name: sectionProfile, Available: true, Lines: []packLine{
		{Cite: "m:p@1", Text: "city: Lisbon"}, {Cite: "m:p@1", Text: "likes: espresso"},
		{Cite: "m:s@1", Text: "preference: Prefers window seats"}, {Cite: "m:s@1", Text: "decision: Flies with TAP"},
	}}
	facts := packSection{Name: sectionFacts, Available: true, Lines: []packLine{{Cite: "m:p@1", Text: "city: Lisbon"}}}
	kept, cuts, block, _ := fitPack([]packSection{profile, facts}, packLimits{Budget: 500}, formatMarkdown, tok.Count)
	if len(kept[0].Lines) != 4 || len(kept[1].Lines) != 0 || len(cuts) != 1 || cuts[0].Reason != cutDuplicate {
		t.Fatalf("kept %v, cut %v:\n%s", kept, cuts, block)
	}
}

// The tokenizer counts as tiktoken does: OpenAI's published counts for fixed strings.
func TestPackTokenizerReference(t *testing.T) {
	want := map[string][2]int{ // cl100k_base, o200k_base
		"hello world":                  {2, 2},
		"tiktoken is great!":           {6, 6},
		"antidisestablishmentarianism": {6, 6},
		"2 + 2 = 4":                    {7, 7},
		"お誕生日おめでとう":                    {9, 8},
	}
	cl, _ := newTokenizers(0).For("cl100k_base", "")
	o2, _ := newTokenizers(0).For("", "gpt-4o")
	for s, w := range want {
		if got := [2]int{cl.Count(s), o2.Count(s)}; got != w {
			t.Errorf("%q: %v tokens, want %v", s, got, w)
		}
	}
	if o2.Encoding != "o200k_base" || o2.Approximate {
		t.Errorf("gpt-4o counts with %+v", o2)
	}
	if c, err := newTokenizers(0).For("", "claude-sonnet-4"); err != nil || !c.Approximate {
		t.Errorf("claude: %+v %v", c, err)
	}
	if _, err := newTokenizers(0).For("", "babbage-002x"); err == nil {
		t.Error("an unknown model family was taken")
	}
	if _, err := newTokenizers(0).For("p50k_base", ""); err == nil {
		t.Error("an encoding a pack does not count was taken")
	}
}
