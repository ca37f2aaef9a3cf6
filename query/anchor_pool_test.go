package query

import (
	"testing"
	"time"
)

// What the date anchor pool reads for a question asked on a session's date: the short
// spans it names (a day, a weekend, a week, a month), read against that date, and no
// pool for a span as wide as a quarter or a year, nor for a question naming no time.
func TestAnchorPoolReadsTheShortSpansAskedOnTheSessionsDate(t *testing.T) {
	d := func(y int, m time.Month, dd int) time.Time { return time.Date(y, m, dd, 0, 0, 0, 0, time.UTC) }
	session := time.Date(2023, 5, 11, 20, 0, 0, 0, time.UTC) // Thursday 11 May 2023
	cases := []struct {
		query    string
		from, to []time.Time
		relative bool
	}{
		{"what did I do last Tuesday?", []time.Time{d(2023, 5, 9)}, []time.Time{d(2023, 5, 10)}, true},
		{"What did we do on Tuesday?", []time.Time{d(2023, 5, 9)}, []time.Time{d(2023, 5, 10)}, true},
		{"what did I do this past Sunday", []time.Time{d(2023, 5, 7)}, []time.Time{d(2023, 5, 8)}, true},
		{"where did we eat in March?", []time.Time{d(2023, 3, 1)}, []time.Time{d(2023, 4, 1)}, true},
		{"what did we do last weekend?", []time.Time{d(2023, 5, 6)}, []time.Time{d(2023, 5, 8)}, true},
		{"who visited last week?", []time.Time{d(2023, 5, 1)}, []time.Time{d(2023, 5, 8)}, true},
		{"what happened 10 days ago?", []time.Time{d(2023, 5, 1)}, []time.Time{d(2023, 5, 2)}, true},
		{"Which city did Kwame come home from on 19 April 2023?", []time.Time{d(2023, 4, 19)}, []time.Time{d(2023, 4, 20)}, false},
		{"what did we plan for next Friday?", []time.Time{d(2023, 5, 12)}, []time.Time{d(2023, 5, 13)}, true},
		// Too wide to say which row: the lexical leg reads their months and years.
		{"what did I do this year?", nil, nil, true},
		{"what did I do in 2022?", nil, nil, false},
		{"what happened last quarter?", nil, nil, true},
		{"what is Kwame's cousin called?", nil, nil, false},
	}
	for _, c := range cases {
		p := planQuery(c.query, session)
		spans := anchorSpans(p.Dates)
		if len(spans) != len(c.from) {
			t.Errorf("%q: the pool reads %+v, want %d spans (dates %+v)", c.query, spans, len(c.from), p.Dates)
			continue
		}
		for i, s := range spans {
			if !s.From.Equal(c.from[i]) || !s.To.Equal(c.to[i]) {
				t.Errorf("%q: span [%s, %s), want [%s, %s)", c.query, s.From.Format(time.DateOnly), s.To.Format(time.DateOnly),
					c.from[i].Format(time.DateOnly), c.to[i].Format(time.DateOnly))
			}
		}
		// A search of one session reads its date only for a relative time.
		if len(p.Dates) > 0 && anyRelative(p.Dates) != c.relative {
			t.Errorf("%q: relative %v, want %v", c.query, anyRelative(p.Dates), c.relative)
		}
	}
}
