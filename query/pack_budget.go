package query

import (
	"encoding/json"
	"strings"
)

// The pure rules of context.pack: which lines a budget keeps, in what order, and how
// the kept lines render. No store, no clock: the same sections give the same bytes.

// Pack sections, in the order a pack fills its budget: who the user is, what is true
// now that the query asks about, what changed lately, the conversation in progress,
// then reference material.
const (
	sectionProfile   = "profile"
	sectionFacts     = "facts"
	sectionRecent    = "recent"
	sectionSession   = "session"
	sectionKnowledge = "knowledge"
)

// packPriority is the stated priority order.
var packPriority = []string{sectionProfile, sectionFacts, sectionRecent, sectionSession, sectionKnowledge}

// sectionTitles are the sections' headings in the markdown rendering.
var sectionTitles = map[string]string{
	sectionProfile:   "Profile",
	sectionFacts:     "Relevant facts",
	sectionRecent:    "Recent changes",
	sectionSession:   "This session",
	sectionKnowledge: "Knowledge",
}

// Why a line was cut.
const (
	cutBudget     = "budget"
	cutPerKey     = "per_key"
	cutPerSession = "per_session"
	cutDuplicate  = "duplicate"
)

// packLine is one line of a pack: its text, and the citation that resolves it to a
// memory version (m:<memory_id>@<version>) or a turn (t:<turn id>).
type packLine struct {
	Cite string `json:"cite"`
	Text string `json:"text"`
	// Tokens is what the line costs in the block, its rendering's share.
	Tokens int `json:"tokens"`
	// key and session are what the per-key and per-session caps count ("" counts
	// under neither).
	key, session string
	// detail is what memory.stack answers of the line's source.
	detail any
}

// packSection is one layer of a pack.
type packSection struct {
	Name      string     `json:"name"`
	Available bool       `json:"available"`
	Note      string     `json:"note,omitempty"`
	Lines     []packLine `json:"lines"`
}

// packCut is a line a pack left out, and why.
type packCut struct {
	Section string `json:"section"`
	Cite    string `json:"cite"`
	Reason  string `json:"reason"`
	Tokens  int    `json:"tokens"`
}

// Budgets a pack takes, in tokens: the least holds the empty JSON block and a line;
// the most is a large model's whole context.
const (
	minPackBudget = 16
	maxPackBudget = 200_000
)

// packLimits are a pack's caps: its token budget, and how many lines one memory key
// and one session may hold (0: no cap).
type packLimits struct {
	Budget     int
	PerKey     int
	PerSession int
}

// Pack renderings.
const (
	formatMarkdown = "markdown"
	formatJSON     = "json"
)

// renderPack renders kept sections as the block a prompt takes: markdown (a heading
// per section with lines, each led by its citation) or compact JSON. A section with no
// line is left out of the block; the answer's sections still say why it is empty.
func renderPack(sections []packSection, format string) string {
	if format == formatJSON {
		type jsonLine struct {
			Cite string `json:"cite"`
			Text string `json:"text"`
		}
		type jsonSection struct {
			Name  string     `json:"name"`
			Lines []jsonLine `json:"lines"`
		}
		out := struct {
			Sections []jsonSection `json:"sections"`
		}{Sections: []jsonSection{}}
		for _, s := range sections {
			if len(s.Lines) == 0 {
				continue
			}
			js := jsonSection{Name: s.Name}
			for _, l := range s.Lines {
				js.Lines = append(js.Lines, jsonLine{Cite: l.Cite, Text: l.Text})
			}
			out.Sections = append(out.Sections, js)
		}
		b, _ := json.Marshal(out)
		return string(b)
	}
	var b strings.Builder
	for _, s := range sections {
		if len(s.Lines) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("## " + sectionTitles[s.Name] + "\n")
		for _, l := range s.Lines {
			b.WriteString(markdownLine(l))
		}
	}
	return b.String()
}

// markdownLine is a line as the markdown block holds it; a line break in the text
// would read as a line of its own, without citation, so it is folded.
func markdownLine(l packLine) string {
	return "- [" + l.Cite + "] " + strings.Join(strings.Fields(l.Text), " ") + "\n"
}

// fitPack keeps the lines of sections (already in priority order, each section's
// lines in its own order) that fit the caps and the budget, measured by count over
// the rendered block: a line the caps refuse or that does not fit is cut, and the
// lines after it are still tried. The block is then counted whole, and while it is
// over (tokens do not always add up across a join) the last line kept is cut, so
// the block never exceeds the budget. It returns the kept sections, the cuts in
// order and the block's tokens.
func fitPack(sections []packSection, lim packLimits, format string, count func(string) int) ([]packSection, []packCut, string, int) {
	kept := make([]packSection, len(sections))
	var cuts []packCut
	perKey, perSession := map[string]int{}, map[string]int{}
	seen := map[string]bool{}
	used := 0
	for i, s := range sections {
		kept[i] = packSection{Name: s.Name, Available: s.Available, Note: s.Note, Lines: []packLine{}}
		heading := count("\n## " + sectionTitles[s.Name] + "\n")
		if format == formatJSON {
			heading = count(`,{"name":"` + s.Name + `","lines":[]}`)
		}
		for _, l := range s.Lines {
			cost := lineCost(l, format, count)
			if len(kept[i].Lines) == 0 {
				cost += heading
			}
			l.Tokens = cost
			// A profile's lines are the fields of one row, all citing its version: they
			// are parts of it, not copies of one another.
			dup := l.Cite
			if s.Name == sectionProfile {
				dup += "\x00" + l.Text
			}
			switch {
			case seen[dup]:
				cuts = append(cuts, packCut{Section: s.Name, Cite: l.Cite, Reason: cutDuplicate, Tokens: cost})
				continue
			case lim.PerKey > 0 && l.key != "" && perKey[l.key] >= lim.PerKey:
				cuts = append(cuts, packCut{Section: s.Name, Cite: l.Cite, Reason: cutPerKey, Tokens: cost})
				continue
			case lim.PerSession > 0 && l.session != "" && perSession[l.session] >= lim.PerSession:
				cuts = append(cuts, packCut{Section: s.Name, Cite: l.Cite, Reason: cutPerSession, Tokens: cost})
				continue
			case used+cost > lim.Budget:
				cuts = append(cuts, packCut{Section: s.Name, Cite: l.Cite, Reason: cutBudget, Tokens: cost})
				continue
			}
			seen[dup], seen[l.Cite] = true, true
			if l.key != "" {
				perKey[l.key]++
			}
			if l.session != "" {
				perSession[l.session]++
			}
			used += cost
			kept[i].Lines = append(kept[i].Lines, l)
		}
	}
	block := renderPack(kept, format)
	tokens := count(block)
	for tokens > lim.Budget {
		last := -1
		for i := range kept {
			if len(kept[i].Lines) > 0 {
				last = i
			}
		}
		if last < 0 {
			break // the empty block: a budget of at least minPackBudget holds it
		}
		l := kept[last].Lines[len(kept[last].Lines)-1]
		kept[last].Lines = kept[last].Lines[:len(kept[last].Lines)-1]
		cuts = append(cuts, packCut{Section: kept[last].Name, Cite: l.Cite, Reason: cutBudget, Tokens: l.Tokens})
		block = renderPack(kept, format)
		tokens = count(block)
	}
	return kept, cuts, block, tokens
}

// lineCost is what a line adds to the rendered block.
func lineCost(l packLine, format string, count func(string) int) int {
	if format == formatJSON {
		b, _ := json.Marshal(struct {
			Cite string `json:"cite"`
			Text string `json:"text"`
		}{l.Cite, l.Text})
		return count(string(b) + ",")
	}
	return count(markdownLine(l))
}
