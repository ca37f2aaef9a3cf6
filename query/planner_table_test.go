package query

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomplane/loom/internal/text"
)

// What the planner reads of a question: the attribute asked of a named entity (as
// index terms: the question's filler, the name and the dates left out) and the
// spans of time it asks about, on the planner's clock (Thursday 10 April 2025).
func TestPlanReadsAttributesAndDates(t *testing.T) {
	d := func(y int, m time.Month, dd int) time.Time { return time.Date(y, m, dd, 0, 0, 0, 0, time.UTC) }
	cases := []struct {
		query    string
		attr     string      // the asked words; "" when none
		from, to []time.Time // the spans, most specific first
	}{
		{"What is the name of Priya's spouse?", "spouse", nil, nil},
		{"Which city is Tomasz based in?", "based", nil, nil},
		{"What is Lars studying?", "studying", nil, nil},
		{"What is Mei's husband called?", "husband", nil, nil},
		{"What did Omar research in 2024?", "research", []time.Time{d(2024, 1, 1)}, []time.Time{d(2025, 1, 1)}},
		{"Where was Priya on 14 June 2021?", "", []time.Time{d(2021, 6, 14)}, []time.Time{d(2021, 6, 15)}},
		{"What did Lars bake last week?", "bake", []time.Time{d(2025, 3, 31)}, []time.Time{d(2025, 4, 7)}},
		{"Who did Sofia meet yesterday?", "meet", []time.Time{d(2025, 4, 9)}, []time.Time{d(2025, 4, 10)}},
		{"What did Amara run in March 2025?", "run", []time.Time{d(2025, 3, 1)}, []time.Time{d(2025, 4, 1)}},
		{"What happened to Hiroshi two weeks ago?", "", []time.Time{d(2025, 3, 24)}, []time.Time{d(2025, 3, 31)}},
		{"What is Declan planning for next month?", "planning", []time.Time{d(2025, 5, 1)}, []time.Time{d(2025, 6, 1)}},
		{"Which books did Greta read in the past 3 days?", "books read", []time.Time{d(2025, 4, 7)}, []time.Time{d(2025, 4, 11)}},
		// The noun a name modifies after an article is the entity's kind, a verb of
		// telling asks what was said, and a phrasal verb's particle is the verb's: none
		// is what the question asks, so no attribute is judged.
		{"What was the Peruvian restaurant Sofia mentioned last week?", "", []time.Time{d(2025, 3, 31)}, []time.Time{d(2025, 4, 7)}},
		{"When did Kwame get back from Lisbon?", "", nil, nil},
		{"What did Sofia give up?", "", nil, nil},
		{"When is the Apollo launch planned?", "planned", nil, nil},
	}
	for _, c := range cases {
		p := planQuery(c.query, planNow)
		want := []string{}
		for _, w := range strings.Fields(c.attr) {
			want = append(want, text.Stem(w))
		}
		if len(p.Entities) == 0 {
			t.Errorf("%q: no entity read", c.query)
		}
		if !slices.Equal(p.AttributeTerms, want) {
			t.Errorf("%q: attribute terms %v, want %v", c.query, p.AttributeTerms, want)
		}
		if len(p.Dates) != len(c.from) {
			t.Errorf("%q: dates %+v, want %d spans", c.query, p.Dates, len(c.from))
			continue
		}
		for i, dr := range p.Dates {
			if !dr.From.Equal(c.from[i]) || !dr.To.Equal(c.to[i]) {
				t.Errorf("%q: span %d is [%s, %s), want [%s, %s)", c.query, i, dr.From.Format(time.DateOnly), dr.To.Format(time.DateOnly),
					c.from[i].Format(time.DateOnly), c.to[i].Format(time.DateOnly))
			}
		}
	}
}

// Relative dates are read against the reference time a search carries (the
// conversation's date), on that time's own calendar day, not against the server's
// clock: the same question asked in different sessions asks about different days.
func TestPlanReadsRelativeDatesAgainstTheReferenceTime(t *testing.T) {
	d := func(y int, m time.Month, dd int) time.Time { return time.Date(y, m, dd, 0, 0, 0, 0, time.UTC) }
	newYork := time.FixedZone("-05:00", -5*3600)
	cases := []struct {
		query    string
		ref      time.Time
		from, to time.Time
	}{
		{"what did I do yesterday?", time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC), d(2023, 5, 7), d(2023, 5, 8)},
		{"what did I do today?", time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC), d(2023, 5, 8), d(2023, 5, 9)},
		// 23:30 in New York is already the next day UTC; the session's own day counts.
		{"what did I do yesterday?", time.Date(2023, 5, 8, 23, 30, 0, 0, newYork), d(2023, 5, 7), d(2023, 5, 8)},
		{"who did I meet last week?", time.Date(2023, 5, 10, 9, 0, 0, 0, time.UTC), d(2023, 5, 1), d(2023, 5, 8)},
		{"what happened three days ago?", time.Date(2023, 5, 10, 9, 0, 0, 0, time.UTC), d(2023, 5, 7), d(2023, 5, 8)},
		{"where did we go in March?", time.Date(2022, 8, 1, 0, 0, 0, 0, time.UTC), d(2022, 3, 1), d(2022, 4, 1)},
		{"what is planned for next month?", time.Date(2022, 12, 20, 0, 0, 0, 0, time.UTC), d(2023, 1, 1), d(2023, 2, 1)},
		{"what did we do last March?", time.Date(2022, 3, 15, 0, 0, 0, 0, time.UTC), d(2021, 3, 1), d(2021, 4, 1)},
		{"what was on 5 May?", time.Date(2019, 6, 1, 0, 0, 0, 0, time.UTC), d(2019, 5, 5), d(2019, 5, 6)},
		{"what did I read in the past 2 days?", time.Date(2023, 5, 10, 9, 0, 0, 0, time.UTC), d(2023, 5, 8), d(2023, 5, 11)},
		// Wednesday 10 May 2023: weeks start on Monday.
		{"what did we do last weekend?", time.Date(2023, 5, 10, 9, 0, 0, 0, time.UTC), d(2023, 5, 6), d(2023, 5, 8)},
		{"any plans this weekend?", time.Date(2023, 5, 10, 9, 0, 0, 0, time.UTC), d(2023, 5, 13), d(2023, 5, 15)},
		{"what did I cook on Sunday?", time.Date(2023, 5, 10, 9, 0, 0, 0, time.UTC), d(2023, 5, 7), d(2023, 5, 8)},
		{"who called last Wednesday?", time.Date(2023, 5, 10, 9, 0, 0, 0, time.UTC), d(2023, 5, 3), d(2023, 5, 4)},
		{"what is on next Monday?", time.Date(2023, 5, 10, 9, 0, 0, 0, time.UTC), d(2023, 5, 15), d(2023, 5, 16)},
		{"what is due this Friday?", time.Date(2023, 5, 10, 9, 0, 0, 0, time.UTC), d(2023, 5, 12), d(2023, 5, 13)},
		// A written date does not move with the reference time.
		{"what happened on 14 June 2021?", time.Date(2023, 5, 10, 9, 0, 0, 0, time.UTC), d(2021, 6, 14), d(2021, 6, 15)},
	}
	for _, c := range cases {
		p := planQuery(c.query, c.ref)
		if len(p.Dates) != 1 {
			t.Errorf("%q at %s: dates %+v, want one span", c.query, c.ref.Format(time.RFC3339), p.Dates)
			continue
		}
		if got := p.Dates[0]; !got.From.Equal(c.from) || !got.To.Equal(c.to) {
			t.Errorf("%q at %s: span [%s, %s), want [%s, %s)", c.query, c.ref.Format(time.RFC3339), got.From.Format(time.DateOnly),
				got.To.Format(time.DateOnly), c.from.Format(time.DateOnly), c.to.Format(time.DateOnly))
		}
	}
}

// A turn's relative times are read against when it was said (its valid_at), so a
// question naming the day in full finds "I got back yesterday" said the day after.
func TestStatedSpansReadRelativeTimesAgainstWhenTheyWereSaid(t *testing.T) {
	d := func(y int, m time.Month, dd int) time.Time { return time.Date(y, m, dd, 0, 0, 0, 0, time.UTC) }
	said := time.Date(2023, 4, 20, 19, 16, 0, 0, time.UTC) // a Thursday
	cases := []struct {
		text     string
		from, to []time.Time
	}{
		{"Maria: I just got back from Lisbon yesterday!", []time.Time{d(2023, 4, 19)}, []time.Time{d(2023, 4, 20)}},
		{"Jonas: I ran the Porto half marathon two weeks ago.", []time.Time{d(2023, 4, 3)}, []time.Time{d(2023, 4, 10)}},
		{"Aiko: We adopted a beagle last weekend.", []time.Time{d(2023, 4, 15)}, []time.Time{d(2023, 4, 17)}},
		{"Omar: Did you watch the match on Saturday?", []time.Time{d(2023, 4, 15)}, []time.Time{d(2023, 4, 16)}},
		// A month or a year is too wide to date a turn by; a written day is mentionedDates'.
		{"Greta: I stopped eating meat back in March.", nil, nil},
		{"Ravi: It happened on 3 May 2021.", nil, nil},
	}
	for _, c := range cases {
		got := statedSpans(c.text, said)
		if len(got) != len(c.from) {
			t.Errorf("%q: spans %+v, want %d", c.text, got, len(c.from))
			continue
		}
		for i, s := range got {
			if !s.From.Equal(c.from[i]) || !s.To.Equal(c.to[i]) {
				t.Errorf("%q: span [%s, %s), want [%s, %s)", c.text, s.From.Format(time.DateOnly), s.To.Format(time.DateOnly),
					c.from[i].Format(time.DateOnly), c.to[i].Format(time.DateOnly))
			}
		}
	}
}
