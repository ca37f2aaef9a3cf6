package extraction

import (
	"regexp"
	"slices"
	"strings"

	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/text"
)

// The text rules of memory.set_from_messages' drop steps and its keys. They read no
// store and call no model; pipeline.go runs them over the extracted facts.

// normalizeKey makes an extracted key the one Loom stores: lower case, words joined by
// "_", segments by "."; a trailing segment that spells the value's object (the words
// the value ends with: "user.city.porto" for "Lives in Porto") is cut, since a key
// names a subject and an attribute, never the value, so that a later statement of the
// same attribute revises the same row. "" when nothing of it is a valid key.
// ("user.tea" for "Drinks green tea" stays: cut, it would name no attribute.)
func normalizeKey(key, value string) string {
	var segs [][]string
	for _, seg := range strings.Split(strings.ToLower(strings.TrimSpace(key)), ".") {
		if words := text.Words(seg); len(words) > 0 {
			segs = append(segs, words)
		}
	}
	if n := len(segs); n > 2 { // what is left still names a subject and an attribute
		last, vw := segs[n-1], text.Words(value)
		if len(last) <= len(vw) && slices.Equal(last, vw[len(vw)-len(last):]) {
			segs = segs[:n-1]
		}
	}
	joined := make([]string, len(segs))
	for i, words := range segs {
		joined[i] = strings.Join(words, "_")
	}
	k := strings.Join(joined, ".")
	if k == "" || memrow.ValidateKey(k) != nil {
		return ""
	}
	return k
}

// restates reports whether a fact's text says what a stored text says: its meaningful
// words and values are all among the stored text's (a shorter restatement), leaving
// out the subjects extraction names every fact by ("User lives in Lisbon" restates
// "lives in Lisbon").
func restates(fact, stored string) bool {
	a, av := text.ContentWords(fact)
	delete(a, "user")
	delete(a, "assistant")
	if len(a)+len(av) == 0 {
		return false
	}
	b, bv := text.ContentWords(stored)
	return text.Subset(a, b) && text.Subset(av, bv)
}

// echoOf is the stored row a fact restates, nil when none: a fact that says again what
// the session was served or wrote adds nothing. A row of the fact's own key that holds
// another value is no echo: the fact revises it.
func echoOf(value string, rows []*memrow.Row) *memrow.Row {
	for _, r := range rows {
		if restates(value, memrow.ValueText(r.Value)) {
			return r
		}
	}
	return nil
}

// narration is a statement of what the assistant or a tool did, with no outcome that
// outlives the session: "Ran the test suite", "The assistant searched the web for
// flights". A fact that names what was found or decided is kept.
var (
	narrationStart = regexp.MustCompile(`^(?:(?:the )?(?:assistant|agent|bot|ai|model|tool|system|loom)\s+)?` +
		`(?:ran|runs|running|called|calls|calling|invoked|executed|searched|searching|looked up|opened|listed|fetched|queried|` +
		`grepped|checked|tried|attempted|used the \S+ tool|read the|reading|viewed|scanned|loaded|retrieved)\b`)
	narrationOutcome = regexp.MustCompile(`\b(?:found|finds|showed|shows|revealed|confirmed|decided|concluded|learned|because|so that|which means)\b`)
)

func narration(value string) bool {
	v := strings.ToLower(strings.TrimSpace(value))
	return narrationStart.MatchString(v) && !narrationOutcome.MatchString(v)
}

// nonDurable is what a coding session says that will not hold next time: a status
// snapshot ("the tests are passing"), housekeeping ("committed the fix") or a plan
// ("will add retries next").
var nonDurablePatterns = []*regexp.Regexp{
	regexp.MustCompile(`\b(?:currently|right now|at the moment|for now|in progress|wip|so far)\b`),
	regexp.MustCompile(`\b(?:is|are) (?:now )?(?:passing|failing|green|red|broken|running|building|compiling)\b`),
	regexp.MustCompile(`^(?:(?:the )?(?:assistant|agent|user|we|i)\s+)?(?:committed|pushed|merged|rebased|formatted|reformatted|cleaned up|` +
		`bumped|staged|stashed|deleted the branch|ran (?:gofmt|go vet|the linter|lint|the tests|tests))\b`),
	regexp.MustCompile(`\b(?:will|going to|plans? to|planned to|next step|todo|to-do|to do next|intends? to)\b`),
}

func nonDurable(value string) bool {
	v := strings.ToLower(strings.TrimSpace(value))
	for _, re := range nonDurablePatterns {
		if re.MatchString(v) {
			return true
		}
	}
	return false
}
