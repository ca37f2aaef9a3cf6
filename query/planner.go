package query

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/loomplane/loom/internal/text"
)

// queryPlan is what the planner reads in a query before any leg runs: the identifiers
// it names (grounding checks the hits hold them), the entities among them (they
// anchor the graph leg), the dates and relative times it asks about (read against the
// planner's clock), a recency intent, a preference and its attribute, and the parts of
// a multi-part question. It is pure: the same text and clock give the same plan.
type queryPlan struct {
	Identifiers []identifier `json:"identifiers"`
	Entities    []string     `json:"entities"`
	Dates       []dateRange  `json:"dates"`
	Recency     bool         `json:"recency"`
	Preference  bool         `json:"preference"`
	Attribute   string       `json:"attribute,omitempty"`
	SubQueries  []string     `json:"sub_queries"`
	// AttributeTerms are the query's index terms that are neither an identifier, a
	// date nor a question's filler: what the query asks about its entities.
	AttributeTerms []string `json:"attribute_terms"`
	// DateTerms are index terms of the asked dates the lexical leg also reads (month
	// names and years), so rows stating such a date in any format enter the pool.
	DateTerms []string `json:"date_terms"`
	// Expansion is what set expansion searched (rank.go), filled once the legs ran:
	// the names the best rows hold beside the question's attribute words.
	Expansion string `json:"expansion,omitempty"`
}

// Identifier kinds.
const (
	identName   = "name"   // a capitalised name: a person, a place, a product
	identCode   = "code"   // letters and digits, or a dotted name: TW-1042, BG95, mlflow.internal.io
	identNumber = "number" // two or more digits
	identQuoted = "quoted" // a phrase in double quotes
)

// identifier is one thing the query names that a hit must hold to be about it.
type identifier struct {
	Text string `json:"text"`
	Kind string `json:"kind"`
}

// pins reports whether a hit holding the identifier keeps its slot under a
// reranker: an exact token, not a name a row may mention in passing.
func (id identifier) pins() bool { return id.Kind != identName }

// dateRange is a span of time the query asks about: [From, To).
type dateRange struct {
	Text     string    `json:"text"`
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Relative bool      `json:"relative"`
}

func (d dateRange) overlaps(from, to time.Time) bool { return from.Before(d.To) && d.From.Before(to) }

var (
	monthNames = []string{"january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"}
	dayNames   = []string{"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
		"mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri", "sat", "sun"}
	// nameParticles may stand lower-case inside a name: Lotte de Vries, Jeroen van Dijk.
	nameParticles = []string{"de", "van", "der", "den", "da", "das", "do", "dos", "del", "della", "di", "du", "la", "le", "von", "bin", "al", "el"}
	// fillerWords are a question's own words: they ask, they do not name what is asked.
	// The verbs of telling are among them: "what did Sofia mention" asks what she said,
	// and a row states it without saying that it was said.
	fillerWords = map[string]bool{}
	// particleWords end a phrasal verb ("give up", "get back", "find out"): the verb's
	// meaning is the pair's, and a row says it in its own words ("stopped", "home since").
	particleWords = map[string]bool{"up": true, "down": true, "out": true, "off": true, "back": true, "away": true}
	// recencyWords ask for what is newest.
	recencyWords = map[string]bool{"latest": true, "newest": true, "recent": true, "recently": true, "currently": true, "current": true,
		"nowadays": true, "lately": true, "now": true, "today": true, "todays": true}
	// dateWords are words of a date expression.
	dateWords = map[string]bool{}
)

func init() {
	for _, w := range strings.Fields(`get got tell know need want please like happen happened happens go went goes use used thing things
		something anything kind sort much many lot lots one ones way ways find look say said know think make made
		take took give gave let us see show also ever still yet already really actually exactly name named call called
		mention mentioned talk talked discuss discussed`) {
		fillerWords[text.Stem(w)] = true
	}
	for _, w := range append(append([]string{"day", "days", "week", "weeks", "month", "months", "year", "years", "ago", "last", "next",
		"past", "this", "coming", "since", "before", "after", "until", "today", "yesterday", "tomorrow", "quarter", "q1", "q2", "q3", "q4",
		"few", "couple", "weekend", "weekends"}, monthNames...), dayNames...) {
		dateWords[text.Stem(w)] = true
	}
	for _, m := range monthNames {
		dateWords[m[:3]] = true
	}
	dateWords["sept"] = true
}

// planQuery plans a query against the time now: the request's reference_time, else
// the planner's clock (which a test injects). Relative dates are read on now's own
// calendar day, in its own offset.
func planQuery(query string, now time.Time) queryPlan {
	p := queryPlan{Identifiers: []identifier{}, Entities: []string{}, Dates: []dateRange{}, SubQueries: []string{},
		AttributeTerms: []string{}, DateTerms: []string{}}
	p.Dates = parseDates(query, now)
	p.Identifiers = identifiers(query, p.Dates)
	for _, id := range p.Identifiers {
		if id.Kind == identName {
			p.Entities = append(p.Entities, id.Text)
		}
	}
	lower := strings.ToLower(query)
	words := text.Words(lower)
	for _, w := range words {
		if recencyWords[w] {
			p.Recency = true
		}
	}
	if strings.Contains(lower, "most recent") || strings.Contains(lower, "up to date") || strings.Contains(lower, "these days") {
		p.Recency = true
	}
	p.Preference, p.Attribute = preferenceOf(lower)
	p.AttributeTerms = attributeTerms(query, p.Identifiers, p.Dates)
	p.DateTerms = dateTerms(p.Dates)
	p.SubQueries = subQueries(query, p.Identifiers)
	return p
}

// token is a word of the query as written, with where its sentence starts.
type token struct {
	text          string
	sentenceStart bool
}

// tokenRE reads words as written: letters and digits, joined inside by - . ' or ’
// (TW-1042, mlflow.internal.io, O'Sullivan, Tidewell's).
var tokenRE = regexp.MustCompile(`[\p{L}\p{N}]+(?:[-.'’][\p{L}\p{N}]+)*`)

func tokens(query string) []token {
	var out []token
	start := true
	last := 0
	for _, loc := range tokenRE.FindAllStringIndex(query, -1) {
		if strings.ContainsAny(query[last:loc[0]], ".?!;:") {
			start = true
		}
		out = append(out, token{text: query[loc[0]:loc[1]], sentenceStart: start})
		start = false
		last = loc[1]
	}
	return out
}

var (
	quotedRE = regexp.MustCompile(`"([^"]+)"|“([^”]+)”`)
	letterRE = regexp.MustCompile(`\p{L}`)
	digitRE  = regexp.MustCompile(`\p{N}`)
)

// identifiers finds what the query names: quoted phrases, codes, numbers (those not
// part of a date it asks about) and capitalised names. A capitalised word opening a
// sentence is a name only when another capitalised word follows it, when it is
// capitalised inside too (ChatGPT), or when the query is a bare keyword query.
func identifiers(query string, dates []dateRange) []identifier {
	out := []identifier{}
	seen := map[string]bool{}
	add := func(t, kind string) {
		k := strings.Join(groundWords(t), " ")
		if k == "" || seen[k] {
			return
		}
		seen[k] = true
		out = append(out, identifier{Text: t, Kind: kind})
	}
	for _, m := range quotedRE.FindAllStringSubmatch(query, -1) {
		add(strings.TrimSpace(m[1]+m[2]), identQuoted)
	}
	inDate := map[string]bool{}
	for _, d := range dates {
		for _, w := range text.Words(d.Text) {
			inDate[w] = true
		}
	}
	toks := tokens(query)
	keyword := len(toks) <= 4
	for _, t := range toks {
		if text.Stopword(strings.ToLower(t.text)) {
			keyword = false
		}
	}
	// A query in title case ("What Is The Company Car Policy") or in capitals says
	// nothing by its capitals: function words are capitalised inside it too.
	caps, words, capStop, lower := 0, 0, 0, false
	for _, t := range toks {
		lw := strings.ToLower(t.text)
		if t.text != strings.ToUpper(t.text) {
			lower = true
		}
		switch {
		case text.Stopword(lw) && capitalised(t.text) && !t.sentenceStart:
			capStop++
		case !text.Stopword(lw) && letterRE.MatchString(t.text):
			words++
			if capitalised(t.text) {
				caps++
			}
		}
	}
	titleCase := !keyword && words >= 2 && ((capStop > 0 && caps*4 >= words*3) || !lower)
	var run []token
	flush := func() {
		if len(run) == 0 {
			return
		}
		for len(run) > 0 && slices.Contains(nameParticles, run[len(run)-1].text) {
			run = run[:len(run)-1]
		}
		if len(run) > 0 && (len(run) > 1 || !run[0].sentenceStart || keyword || innerCapital(run[0].text)) {
			parts := make([]string, len(run))
			for i, t := range run {
				parts[i] = t.text
			}
			add(strings.Join(parts, " "), identName)
		}
		run = nil
	}
	for _, t := range toks {
		w := trimPossessive(t.text)
		lw := strings.ToLower(w)
		switch {
		case letterRE.MatchString(w) && digitRE.MatchString(w) && !isDateToken(lw):
			flush()
			add(w, identCode)
		case strings.Contains(w, ".") && len(w) >= 5 && letterRE.MatchString(w) && !digitRE.MatchString(w):
			flush()
			add(w, identCode)
		case !letterRE.MatchString(w) && len(digitRE.FindAllString(w, -1)) >= 2:
			flush()
			if !inDate[lw] {
				add(w, identNumber)
			}
		case capitalised(w) && !titleCase && !text.Stopword(lw) && !isDateWord(lw) && !firstPerson(lw):
			run = append(run, token{text: w, sentenceStart: t.sentenceStart && len(run) == 0})
		case len(run) > 0 && slices.Contains(nameParticles, w):
			run = append(run, token{text: w})
		default:
			flush()
		}
	}
	flush()
	return out
}

// firstPerson: I, I'm, I've, I'd, I'll.
func firstPerson(lw string) bool {
	return lw == "i" || strings.HasPrefix(lw, "i'") || strings.HasPrefix(lw, "i’")
}

func capitalised(w string) bool {
	for _, r := range w {
		return unicode.IsUpper(r)
	}
	return false
}

func innerCapital(w string) bool {
	for i, r := range w {
		if i > 0 && unicode.IsUpper(r) {
			return true
		}
	}
	return false
}

func trimPossessive(w string) string {
	for _, s := range []string{"'s", "’s"} {
		if strings.HasSuffix(w, s) {
			return w[:len(w)-len(s)]
		}
	}
	return w
}

func isDateWord(lw string) bool {
	return slices.Contains(monthNames, lw) || slices.Contains(dayNames, lw)
}

// isDateToken: an ISO date or a quarter is a date, not a code.
func isDateToken(lw string) bool {
	return isoDateRE.MatchString(lw) || quarterTokRE.MatchString(lw) || ordinalRE.MatchString(lw)
}

var (
	quarterTokRE = regexp.MustCompile(`^q[1-4]$`)
	ordinalRE    = regexp.MustCompile(`^\d{1,2}(st|nd|rd|th)$`)
)

// kindNouns name what kind of thing an entity is ("the Kraków office", "the Legal
// team"): said of the entity, they are not what is asked about it.
var kindNouns = map[string]bool{"office": true, "team": true, "project": true, "customer": true, "vendor": true,
	"company": true, "department": true, "group": true, "site": true, "building": true, "city": true, "account": true}

// attributeTerms are the query's index terms less its identifiers' words, the kind
// nouns of its names, date words, recency words and a question's filler.
func attributeTerms(query string, ids []identifier, dates []dateRange) []string {
	skip := map[string]bool{}
	for _, d := range dates {
		for _, t := range text.Terms(d.Text) {
			skip[t] = true
		}
	}
	for _, m := range preferenceRE.FindAllStringSubmatch(strings.ToLower(query), -1) {
		skip[text.Stem(m[1])] = true
	}
	for _, id := range ids {
		for _, t := range text.Terms(id.Text) {
			skip[t] = true
		}
		if id.Kind == identName {
			for k := range kindNouns {
				skip[text.Stem(k)] = true
			}
		}
	}
	for _, k := range namedKinds(query, ids) {
		skip[k] = true
	}
	var out []string
	for _, t := range dedupe(text.Terms(query)) {
		if skip[t] || fillerWords[t] || particleWords[t] || dateWords[t] || recencyWords[t] || !letterRE.MatchString(t) || len([]rune(t)) < 2 {
			continue
		}
		out = append(out, t)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// namedKinds are the stems of the nouns a name modifies after an article ("the Peruvian
// restaurant", "a Tesla car", "the Kraków office"): said of the entity, they say what
// kind of thing it is, as kindNouns do, not what is asked about it; a row names the
// thing by its own name ("Pachamama, a tiny Peruvian place").
func namedKinds(query string, ids []identifier) []string {
	names := map[string]bool{}
	for _, id := range ids {
		if id.Kind == identName {
			names[strings.Join(groundWords(id.Text), " ")] = true
		}
	}
	toks := tokens(query)
	var out []string
	for i := 0; i < len(toks); i++ {
		if a := strings.ToLower(toks[i].text); a != "the" && a != "a" && a != "an" {
			continue
		}
		for j := i + 2; j < len(toks) && j <= i+4; j++ {
			run := make([]string, 0, j-i-1)
			for _, t := range toks[i+1 : j] {
				run = append(run, t.text)
			}
			next := strings.ToLower(toks[j].text)
			// A participle after the name is what is said of it ("the IPO planned"), not its kind.
			if names[strings.Join(groundWords(strings.Join(run, " ")), " ")] && !capitalised(toks[j].text) &&
				!text.Stopword(next) && letterRE.MatchString(next) && !strings.HasSuffix(next, "ed") {
				out = append(out, text.Stem(next))
				break
			}
		}
	}
	return out
}

var preferenceRE = regexp.MustCompile(`\b(favou?rites?|preferred|prefers?|preferences?|likes?|loves?|enjoys?)\b((?:\s+[\p{L}\p{N}-]+){0,4})`)

// preferenceOf reads a preference intent ("favourite X", "prefers", "likes") and the
// attribute it asks about: the first content words after the trigger.
func preferenceOf(lower string) (bool, string) {
	m := preferenceRE.FindStringSubmatch(lower)
	if m == nil {
		return false, ""
	}
	var attr []string
	for _, w := range text.Words(m[2]) {
		if text.Stopword(w) || fillerWords[text.Stem(w)] {
			if len(attr) > 0 {
				break
			}
			continue
		}
		attr = append(attr, w)
		if len(attr) == 2 {
			break
		}
	}
	return true, strings.Join(attr, " ")
}

// subQueries splits a question of several parts: at sentence ends, and at "and" or a
// comma followed by a question word ("Who leads X and when is it due?"). A part that
// names no identifier gets the first part's, so "when is it due" searches for X.
func subQueries(query string, ids []identifier) []string {
	parts := splitRE.Split(query, -1)
	var out []string
	for _, p := range parts {
		p = strings.TrimSpace(strings.Trim(p, " ,;?.!"))
		if len(text.Terms(p)) == 0 {
			continue
		}
		out = append(out, p)
	}
	if len(out) < 2 {
		return []string{}
	}
	var anchors []string
	for _, id := range ids {
		if strings.Contains(out[0], id.Text) {
			anchors = append(anchors, id.Text)
		}
	}
	first := attributeTerms(out[0], ids, nil)
	for i := 1; i < len(out); i++ {
		named := false
		for _, id := range ids {
			if strings.Contains(out[i], id.Text) {
				named = true
			}
		}
		if !named && len(anchors) > 0 {
			out[i] += " " + strings.Join(anchors, " ")
		} else if len(attributeTerms(out[i], ids, nil)) == 0 && len(first) > 0 {
			// "and where is the 2025 one": the part asks about the first part's subject.
			out[i] += " " + strings.Join(wordsOf(out[0], first), " ")
		}
	}
	if len(out) > maxSubQueries {
		out = out[:maxSubQueries]
	}
	return out
}

// maxSubQueries bounds the parts a question is searched in.
const maxSubQueries = 3

var splitRE = regexp.MustCompile(`(?i)[?;!]\s+|\.\s+|,?\s+and\s+(?:who|what|when|where|which|why|how|whom|whose|is|are|was|were|does|do|did|can|could|should|will|would|has|have)\b|,\s+(?:who|what|when|where|which|why|how)\b`)

// Dates.

var (
	isoDateRE    = regexp.MustCompile(`\b(\d{4})-(\d{2})-(\d{2})\b`)
	monthAlt     = `(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?`
	dayMonthYear = regexp.MustCompile(`\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?` + monthAlt + `,?\s+(\d{4})\b`)
	monthDayYear = regexp.MustCompile(`\b` + monthAlt + `\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b`)
	monthYear    = regexp.MustCompile(`\b` + monthAlt + `\s+(?:of\s+)?(\d{4})\b`)
	dayMonth     = regexp.MustCompile(`\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?` + monthAlt + `\b`)
	monthDay     = regexp.MustCompile(`\b` + monthAlt + `\s+(\d{1,2})(?:st|nd|rd|th)?\b`)
	// A month alone counts after a preposition ("in March", "since May"): "may" and
	// "march" are words too.
	monthAlone  = regexp.MustCompile(`\b(?:in|during|since|before|after|until|by|of|from|last|next|this)\s+` + monthAlt + `\b`)
	quarterRE   = regexp.MustCompile(`\bq([1-4])\s+(\d{4})\b`)
	yearRE      = regexp.MustCompile(`\b(19\d{2}|20\d{2})\b`)
	relativeRE  = regexp.MustCompile(`\b(today|yesterday|tomorrow|(?:this|last|next|past|coming|previous)\s+(?:week|month|year|quarter))\b`)
	agoRE       = regexp.MustCompile(`\b(\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of)\s+(day|week|month|year)s?\s+ago\b`)
	weekendRE   = regexp.MustCompile(`\b(last|this|next|this past|the)\s+weekend\b`)
	weekdayRE   = regexp.MustCompile(`\b(last|on|this past|next|this)\s+(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b`)
	lastNRE     = regexp.MustCompile(`\b(?:in\s+)?(?:the\s+)?(?:last|past|previous)\s+(\d+|two|three|four|five|six|seven|eight|nine|ten|few|couple of)\s+(day|week|month|year)s?\b`)
	numberWords = map[string]int{"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
		"nine": 9, "ten": 10, "few": 3, "a few": 3, "couple of": 2, "a couple of": 2}
)

func monthOf(s string) time.Month {
	s = strings.TrimSuffix(s, ".")
	for i, m := range monthNames {
		if s == m || (len(s) >= 3 && strings.HasPrefix(m, s)) {
			return time.Month(i + 1)
		}
	}
	return 0
}

func atoi(s string) int {
	if n, ok := numberWords[s]; ok {
		return n
	}
	n, _ := strconv.Atoi(s)
	return n
}

func day(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }

// parseDates finds the dates and spans of time the query names, most specific first:
// a span a more specific one already covers (the year of "14 June 2021") is not
// listed again.
func parseDates(query string, now time.Time) []dateRange {
	r := newDateReader(query, now)
	// Each span's text is claimed by the first reading that takes it, the most specific
	// first.
	r.fullDates()
	r.monthsAndQuarters()
	r.daysOfThisYear()
	r.relativeSpans()
	r.monthWords()
	r.years()
	if r.out == nil {
		return []dateRange{}
	}
	return r.out
}

// dateReader is parseDates' state: the query, the clock, the bytes of the query a
// date already took, and the dates found.
type dateReader struct {
	query, lower string
	now, today   time.Time
	taken        []bool
	out          []dateRange
}

func newDateReader(query string, now time.Time) *dateReader {
	lower := strings.ToLower(query)
	// now's own calendar day: a reference time of 23:30-05:00 asks about that evening's
	// day, not the next one UTC reads.
	return &dateReader{query: query, lower: lower, now: now, today: day(now.Year(), now.Month(), now.Day()), taken: make([]bool, len(lower))}
}

// claim takes the query's bytes at loc, unless a date took one of them already.
func (r *dateReader) claim(loc []int) bool {
	for i := loc[0]; i < loc[1]; i++ {
		if r.taken[i] {
			return false
		}
	}
	for i := loc[0]; i < loc[1]; i++ {
		r.taken[i] = true
	}
	return true
}

func (r *dateReader) addDay(loc []int, y int, m time.Month, d int, rel bool) {
	if m == 0 || d < 1 || d > 31 || !r.claim(loc) {
		return
	}
	from := day(y, m, d)
	r.out = append(r.out, dateRange{Text: r.query[loc[0]:loc[1]], From: from, To: from.AddDate(0, 0, 1), Relative: rel})
}

func (r *dateReader) addSpan(loc []int, from, to time.Time, rel bool) {
	if !r.claim(loc) {
		return
	}
	r.out = append(r.out, dateRange{Text: r.query[loc[0]:loc[1]], From: from, To: to, Relative: rel})
}

// part is the query's lowercased text at submatch i of m.
func (r *dateReader) part(m []int, i int) string { return r.lower[m[2*i]:m[2*i+1]] }

// fullDates are the days written with their year: 2024-03-05, 5 march 2024, march 5 2024.
func (r *dateReader) fullDates() {
	for _, m := range isoDateRE.FindAllStringSubmatchIndex(r.lower, -1) {
		mo, _ := strconv.Atoi(r.part(m, 2))
		r.addDay(m[:2], atoi(r.part(m, 1)), time.Month(mo), atoi(r.part(m, 3)), false)
	}
	for _, m := range dayMonthYear.FindAllStringSubmatchIndex(r.lower, -1) {
		r.addDay(m[:2], atoi(r.part(m, 3)), monthOf(r.part(m, 2)), atoi(r.part(m, 1)), false)
	}
	for _, m := range monthDayYear.FindAllStringSubmatchIndex(r.lower, -1) {
		r.addDay(m[:2], atoi(r.part(m, 3)), monthOf(r.part(m, 1)), atoi(r.part(m, 2)), false)
	}
}

// monthsAndQuarters are a month or a quarter of a year: march 2024, q1 2024.
func (r *dateReader) monthsAndQuarters() {
	for _, m := range monthYear.FindAllStringSubmatchIndex(r.lower, -1) {
		if mo := monthOf(r.part(m, 1)); mo != 0 {
			from := day(atoi(r.part(m, 2)), mo, 1)
			r.addSpan(m[:2], from, from.AddDate(0, 1, 0), false)
		}
	}
	for _, m := range quarterRE.FindAllStringSubmatchIndex(r.lower, -1) {
		q := atoi(r.part(m, 1))
		from := day(atoi(r.part(m, 2)), time.Month(3*q-2), 1)
		r.addSpan(m[:2], from, from.AddDate(0, 3, 0), false)
	}
}

// daysOfThisYear are days written without a year: 5 march, march 5.
func (r *dateReader) daysOfThisYear() {
	for _, m := range dayMonth.FindAllStringSubmatchIndex(r.lower, -1) {
		r.addDay(m[:2], r.now.Year(), monthOf(r.part(m, 2)), atoi(r.part(m, 1)), true)
	}
	for _, m := range monthDay.FindAllStringSubmatchIndex(r.lower, -1) {
		// "may 5" is a date; "march 2" could be a count, but a month word before a
		// day number reads as a date.
		r.addDay(m[:2], r.now.Year(), monthOf(r.part(m, 1)), atoi(r.part(m, 2)), true)
	}
}

// relativeSpans are spans relative to today: yesterday, last week, 3 days ago, the
// last 2 months.
func (r *dateReader) relativeSpans() {
	for _, m := range relativeRE.FindAllStringSubmatchIndex(r.lower, -1) {
		from, to := relativeSpan(r.part(m, 1), r.today)
		r.addSpan(m[:2], from, to, true)
	}
	for _, m := range agoRE.FindAllStringSubmatchIndex(r.lower, -1) {
		from, to := agoSpan(r.today, atoi(r.part(m, 1)), r.part(m, 2))
		r.addSpan(m[:2], from, to, true)
	}
	for _, m := range weekendRE.FindAllStringSubmatchIndex(r.lower, -1) {
		from := weekendOf(r.today, r.part(m, 1))
		r.addSpan(m[:2], from, from.AddDate(0, 0, 2), true)
	}
	for _, m := range weekdayRE.FindAllStringSubmatchIndex(r.lower, -1) {
		at := weekdayOf(r.today, r.part(m, 1), r.part(m, 2))
		r.addSpan(m[:2], at, at.AddDate(0, 0, 1), true)
	}
	for _, m := range lastNRE.FindAllStringSubmatchIndex(r.lower, -1) {
		n, unit := atoi(r.part(m, 1)), r.part(m, 2)
		r.addSpan(m[:2], shift(r.today, unit, -n), r.today.AddDate(0, 0, 1), true)
	}
}

// weekendOf is the Saturday a weekend starts on: "last weekend" the one before
// today's week (weeks start on Monday), "this" or "the" weekend today's week's, "next"
// the one after.
func weekendOf(today time.Time, which string) time.Time {
	saturday := today.AddDate(0, 0, -((int(today.Weekday())+6)%7)+5)
	switch which {
	case "last", "this past":
		return saturday.AddDate(0, 0, -7)
	case "next":
		return saturday.AddDate(0, 0, 7)
	}
	return saturday
}

// weekdayOf is the day a weekday names: "on", "last" or "this past" Saturday is the
// latest Saturday before today, "next" the first after it, "this" the one in today's
// week.
func weekdayOf(today time.Time, which, name string) time.Time {
	want := time.Weekday((slices.Index(dayNames, name) + 1) % 7) // dayNames start on Monday
	switch which {
	case "next":
		d := (int(want) - int(today.Weekday()) + 7) % 7
		if d == 0 {
			d = 7
		}
		return today.AddDate(0, 0, d)
	case "this":
		return today.AddDate(0, 0, (int(want)+6)%7-(int(today.Weekday())+6)%7)
	}
	d := (int(today.Weekday()) - int(want) + 7) % 7
	if d == 0 {
		d = 7
	}
	return today.AddDate(0, 0, -d)
}

// statedSpans are the spans of time a row's text states, its relative ones ("yesterday",
// "last weekend", "two weeks ago", "on Saturday") read against the day it was said
// (its valid_at), a span of a week at most: what the date anchor compares with the
// query's spans.
func statedSpans(s string, said time.Time) []dateRange {
	var out []dateRange
	for _, d := range parseDates(s, said) {
		if d.Relative && d.To.Sub(d.From) <= 7*24*time.Hour {
			out = append(out, d)
		}
	}
	return out
}

// agoSpan is "n units ago": the day then, or the week around it, or its month or year.
func agoSpan(today time.Time, n int, unit string) (from, to time.Time) {
	at := shift(today, unit, -n)
	switch unit {
	case "week":
		return at.AddDate(0, 0, -3), at.AddDate(0, 0, 4)
	case "month":
		from = day(at.Year(), at.Month(), 1)
		return from, from.AddDate(0, 1, 0)
	case "year":
		from = day(at.Year(), 1, 1)
		return from, from.AddDate(1, 0, 0)
	}
	return at, at.AddDate(0, 0, 1)
}

// monthWords are a month named after a word that makes it a time (in march, since may):
// this year's, or the last or next of its name.
func (r *dateReader) monthWords() {
	for _, m := range monthAlone.FindAllStringSubmatchIndex(r.lower, -1) {
		mo := monthOf(r.part(m, 1))
		if mo == 0 {
			continue
		}
		y := r.now.Year()
		word := strings.Fields(r.lower[m[0]:m[1]])[0]
		switch {
		case word == "last" && mo >= r.now.Month():
			y--
		case word == "next" && mo <= r.now.Month():
			y++
		}
		from := day(y, mo, 1)
		r.addSpan([]int{m[2], m[3]}, from, from.AddDate(0, 1, 0), true)
	}
}

// years are a year named alone.
func (r *dateReader) years() {
	for _, m := range yearRE.FindAllStringSubmatchIndex(r.lower, -1) {
		from := day(atoi(r.part(m, 1)), 1, 1)
		r.addSpan(m[:2], from, from.AddDate(1, 0, 0), false)
	}
}

func shift(t time.Time, unit string, n int) time.Time {
	switch unit {
	case "week":
		return t.AddDate(0, 0, 7*n)
	case "month":
		return t.AddDate(0, n, 0)
	case "year":
		return t.AddDate(n, 0, 0)
	}
	return t.AddDate(0, 0, n)
}

// relativeSpan resolves today, yesterday, tomorrow and this/last/next week, month,
// quarter or year against the day the planner's clock reads. Weeks start on Monday.
func relativeSpan(expr string, today time.Time) (time.Time, time.Time) {
	switch expr {
	case "today":
		return today, today.AddDate(0, 0, 1)
	case "yesterday":
		return today.AddDate(0, 0, -1), today
	case "tomorrow":
		return today.AddDate(0, 0, 1), today.AddDate(0, 0, 2)
	}
	f := strings.Fields(expr)
	which, unit := f[0], f[1]
	var from time.Time
	var step func(time.Time, int) time.Time
	switch unit {
	case "week":
		from = today.AddDate(0, 0, -((int(today.Weekday()) + 6) % 7))
		step = func(t time.Time, n int) time.Time { return t.AddDate(0, 0, 7*n) }
	case "month":
		from = day(today.Year(), today.Month(), 1)
		step = func(t time.Time, n int) time.Time { return t.AddDate(0, n, 0) }
	case "quarter":
		from = day(today.Year(), time.Month((int(today.Month())-1)/3*3+1), 1)
		step = func(t time.Time, n int) time.Time { return t.AddDate(0, 3*n, 0) }
	default:
		from = day(today.Year(), 1, 1)
		step = func(t time.Time, n int) time.Time { return t.AddDate(n, 0, 0) }
	}
	switch which {
	case "last", "past", "previous":
		from = step(from, -1)
	case "next", "coming":
		from = step(from, 1)
	}
	return from, step(from, 1)
}

// dateTerms are the month names and years of the spans the query names, as the
// lexical leg's terms: a row stating a date of the span in any of the usual formats
// holds some of them. A span longer than a quarter gives its years only.
func dateTerms(dates []dateRange) []string {
	var out []string
	seen := map[string]bool{}
	add := func(w string) {
		for _, t := range text.Terms(w) {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	for _, d := range dates {
		if d.To.Sub(d.From) <= 92*24*time.Hour {
			for m := day(d.From.Year(), d.From.Month(), 1); m.Before(d.To); m = m.AddDate(0, 1, 0) {
				name := monthNames[m.Month()-1]
				add(name)
				add(name[:3])
				add(fmt.Sprint(m.Year()))
			}
			continue
		}
		for y := d.From.Year(); y <= d.To.Add(-time.Nanosecond).Year(); y++ {
			add(fmt.Sprint(y))
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// mentionedDates are the days a row's text states (the formats parseDates reads, a
// month without a day and a bare year aside): what the date anchor compares with the
// query's spans.
func mentionedDates(s string) []time.Time {
	lower := strings.ToLower(s)
	var out []time.Time
	for _, m := range isoDateRE.FindAllStringSubmatch(lower, -1) {
		mo, _ := strconv.Atoi(m[2])
		out = append(out, day(atoi(m[1]), time.Month(mo), atoi(m[3])))
	}
	for _, m := range dayMonthYear.FindAllStringSubmatch(lower, -1) {
		if mo := monthOf(m[2]); mo != 0 {
			out = append(out, day(atoi(m[3]), mo, atoi(m[1])))
		}
	}
	for _, m := range monthDayYear.FindAllStringSubmatch(lower, -1) {
		if mo := monthOf(m[1]); mo != 0 {
			out = append(out, day(atoi(m[3]), mo, atoi(m[2])))
		}
	}
	return out
}
