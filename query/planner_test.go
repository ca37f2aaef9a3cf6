package query

import (
	"slices"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/text"
)

// The planner's clock: Thursday 10 April 2025.
var planNow = time.Date(2025, 4, 10, 9, 30, 0, 0, time.UTC)

func day0(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

func TestPlanReadsDatesAndRelativeTimes(t *testing.T) {
	cases := []struct {
		query    string
		from, to time.Time
	}{
		{"Who joined on 14 June 2021?", day0(2021, 6, 14), day0(2021, 6, 15)},
		{"what happened on June 14, 2021", day0(2021, 6, 14), day0(2021, 6, 15)},
		{"the release of 2021-06-14", day0(2021, 6, 14), day0(2021, 6, 15)},
		{"Who joined in March 2019?", day0(2019, 3, 1), day0(2019, 4, 1)},
		{"what is due in May", day0(2025, 5, 1), day0(2025, 6, 1)},
		{"what shipped last March", day0(2025, 3, 1), day0(2025, 4, 1)},
		{"what shipped last May", day0(2024, 5, 1), day0(2024, 6, 1)},
		{"the 2023 hires", day0(2023, 1, 1), day0(2024, 1, 1)},
		{"revenue in Q3 2024", day0(2024, 7, 1), day0(2024, 10, 1)},
		{"what changed yesterday", day0(2025, 4, 9), day0(2025, 4, 10)},
		{"what changed last week", day0(2025, 3, 31), day0(2025, 4, 7)},
		{"what is due this month", day0(2025, 4, 1), day0(2025, 5, 1)},
		{"what is due next month", day0(2025, 5, 1), day0(2025, 6, 1)},
		{"what was due six months ago", day0(2024, 10, 1), day0(2024, 11, 1)},
		{"notes from the past 3 days", day0(2025, 4, 7), day0(2025, 4, 11)},
	}
	for _, c := range cases {
		p := planQuery(c.query, planNow)
		if len(p.Dates) != 1 || !p.Dates[0].From.Equal(c.from) || !p.Dates[0].To.Equal(c.to) {
			t.Errorf("%q: dates %+v, want [%s, %s)", c.query, p.Dates, c.from.Format(time.DateOnly), c.to.Format(time.DateOnly))
		}
	}
	// A month word that is no date stays a word; the day number of a date is no
	// identifier.
	if p := planQuery("May I bring my dog?", planNow); len(p.Dates) != 0 {
		t.Errorf("'May I' read as a date: %+v", p.Dates)
	}
	p := planQuery("Who joined Tidewell on 14 June 2021?", planNow)
	if !slices.Equal(p.DateTerms, []string{"june", "jun", "2021"}) {
		t.Errorf("date terms %v, want the month names and the year", p.DateTerms)
	}
	for _, id := range p.Identifiers {
		if id.Kind == identNumber {
			t.Errorf("a date's number read as an identifier: %+v", p.Identifiers)
		}
	}
}

func TestPlanFindsIdentifiersAndEntities(t *testing.T) {
	cases := []struct {
		query string
		want  []identifier
	}{
		{"What happened in INC-9999?", []identifier{{"INC-9999", identCode}}},
		{"Where does Marcus Feldman work?", []identifier{{"Marcus Feldman", identName}}},
		{"When is Lotte de Vries's birthday?", []identifier{{"Lotte de Vries", identName}}},
		{"May I paste client information into ChatGPT?", []identifier{{"ChatGPT", identName}}},
		{`who said "ship it friday"`, []identifier{{"ship it friday", identQuoted}}},
		{"Quectel BG95", []identifier{{"Quectel", identName}, {"BG95", identCode}}},
		{"is order 48213 late", []identifier{{"48213", identNumber}}},
		{"person.daniel-okafor.allergy", []identifier{{"person.daniel-okafor.allergy", identCode}}},
		// A capitalised first word is a question's, not a name; title case says nothing.
		{"Nairobi office address and wifi", nil},
		{"During which part of the day should everyone be reachable?", nil},
		{"What Is The Company Car Policy", nil},
		{"What should I do when I'm too unwell to come in?", nil},
	}
	for _, c := range cases {
		p := planQuery(c.query, planNow)
		if !slices.Equal(p.Identifiers, c.want) && !(len(c.want) == 0 && len(p.Identifiers) == 0) {
			t.Errorf("%q: identifiers %+v, want %+v", c.query, p.Identifiers, c.want)
		}
	}
	p := planQuery("What is Pieter Jansen's favourite football club?", planNow)
	if !slices.Equal(p.Entities, []string{"Pieter Jansen"}) || !p.Preference || p.Attribute != "football club" {
		t.Errorf("entities %v, preference %v %q", p.Entities, p.Preference, p.Attribute)
	}
	if !slices.Equal(p.AttributeTerms, []string{text.Stem("football"), "club"}) {
		t.Errorf("attribute terms %v: the name, the trigger and the possessive are not what is asked", p.AttributeTerms)
	}
	if p := planQuery("What is the headcount of the Legal team?", planNow); !slices.Equal(p.AttributeTerms, []string{"headcount"}) {
		t.Errorf("attribute terms %v: a kind noun beside a name is not asked", p.AttributeTerms)
	}
	if p := planQuery("what is the latest on the migration", planNow); !p.Recency {
		t.Error("'latest' is a recency intent")
	}
}

func TestPlanSplitsMultiPartQuestions(t *testing.T) {
	p := planQuery("Who leads Hollowmere and when is it due?", planNow)
	if !slices.Equal(p.SubQueries, []string{"Who leads Hollowmere", "is it due Hollowmere"}) {
		t.Errorf("sub-queries %q: the second part carries the first part's name", p.SubQueries)
	}
	p = planQuery("Where was the 2024 offsite and where is the 2025 one?", planNow)
	if !slices.Equal(p.SubQueries, []string{"Where was the 2024 offsite", "is the 2025 one offsite"}) {
		t.Errorf("sub-queries %q: a part asking nothing of its own carries the first part's subject", p.SubQueries)
	}
	for _, q := range []string{"Nairobi office address and wifi", "bread and butter pudding recipe"} {
		if p := planQuery(q, planNow); len(p.SubQueries) != 0 {
			t.Errorf("%q split into %q", q, p.SubQueries)
		}
	}
}

func TestMentionedDates(t *testing.T) {
	got := mentionedDates("Quokka's beta is due November 15, 2024; the review was 2 January 2025 and the cutover 2025-03-31.")
	want := []time.Time{day0(2025, 3, 31), day0(2025, 1, 2), day0(2024, 11, 15)}
	if len(got) != len(want) {
		t.Fatalf("dates %v, want %v", got, want)
	}
	for _, w := range want {
		if !slices.ContainsFunc(got, w.Equal) {
			t.Errorf("%s not read from the text: %v", w.Format(time.DateOnly), got)
		}
	}
}
