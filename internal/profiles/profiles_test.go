package profiles

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/memrow"
)

func TestDigestFollowsTheFactsNotTheirOrder(t *testing.T) {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	a := &memrow.Row{MemoryID: "a", ContentSHA256: "1", Confidence: 1, UpdatedAt: at}
	b := &memrow.Row{MemoryID: "b", ContentSHA256: "2", Confidence: 0.8, UpdatedAt: at}
	base := Digest([]*memrow.Row{a, b})
	if Digest([]*memrow.Row{b, a}) != base {
		t.Fatal("the digest depends on the facts' order")
	}
	edited := *b
	edited.ContentSHA256 = "3"
	restated := *b
	restated.UpdatedAt = at.Add(time.Hour)
	valid := at.Add(-time.Hour)
	dated := *b
	dated.ValidAt = &valid
	for name, facts := range map[string][]*memrow.Row{
		"an edit": {a, &edited}, "a restatement": {a, &restated}, "a valid_at": {a, &dated}, "a deletion": {a}, "no fact": nil,
	} {
		if Digest(facts) == base {
			t.Errorf("%s leaves the digest as it was", name)
		}
	}
	if s := (Stamp{SchemaHash: "h", Digest: base, Sources: 2}); StampOf(&memrow.Row{Tags: s.Tags()}) != s {
		t.Fatal("a stamp does not read back from its tags")
	}
}

func TestRenderWritesTheFieldsThatHoldSomething(t *testing.T) {
	v := json.RawMessage(`{"name":"Ana","city":null,"likes":["espresso","jazz"],"work":{"role":"nurse","team":""},"vegan":true}`)
	md, err := Render("ana", v, FormatMarkdown)
	if err != nil {
		t.Fatal(err)
	}
	want := "## Profile of ana\n- **likes**: espresso; jazz\n- **name**: Ana\n- **vegan**: yes\n- **work**:\n  - **role**: nurse\n"
	if md != want {
		t.Fatalf("markdown:\n%s\nwant:\n%s", md, want)
	}
	text, _ := Render("ana", v, FormatText)
	if text != "Profile of ana:\n  likes: espresso; jazz\n  name: Ana\n  vegan: yes\n  work:\n    role: nurse\n" {
		t.Fatalf("text:\n%s", text)
	}
}

func TestRenderSectionListsPreferencesThenDecisions(t *testing.T) {
	v := json.RawMessage(`{"preferences":["Prefers window seats"," "],"decisions":["Flies with TAP"]}`)
	md, err := RenderSection("ana", v, FormatMarkdown)
	if err != nil {
		t.Fatal(err)
	}
	if want := "## Preferences and decisions of ana\n### Preferences\n- Prefers window seats\n### Decisions\n- Flies with TAP\n"; md != want {
		t.Fatalf("markdown:\n%s\nwant:\n%s", md, want)
	}
	text, _ := RenderSection("ana", json.RawMessage(`{"preferences":[],"decisions":["Flies with TAP"]}`), FormatText)
	if text != "Preferences and decisions of ana:\n  Decisions:\n    - Flies with TAP\n" {
		t.Fatalf("text:\n%s", text)
	}
	s, _ := SectionOf(v)
	if got := SectionLines(s); len(got) != 2 || got[0] != "preference: Prefers window seats" || got[1] != "decision: Flies with TAP" {
		t.Fatalf("lines %q", got)
	}
	if _, err := SectionOf(json.RawMessage(`{"preferences":[],"decisions":[],"other":1}`)); err == nil {
		t.Fatal("a section with a field of another shape was read")
	}
}
