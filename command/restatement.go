package command

import (
	"slices"
	"strings"
	"unicode"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/text"
)

// A fact stated for an older value holds over a new one only while the new value says
// nothing the old did not and still states it (memory-architecture, "Revisions"): the
// new value's sentences are the old one's, in order, each whole or cut to a statement
// of the triple, and no statement is dropped. A statement is a sentence naming the
// object that does not ask, cut after the clause naming the object or the first with
// the relation's words, whichever comes later; a sentence without the relation's words
// counts only whole. Clauses end at a comma or colon and at "and" or "but", sentences
// at .;?!, never inside a name of the triple ("Marks and Spencer", "Austin, Texas").
// When in doubt the fact closes: words alone cannot tell detail from a retraction.

// restated keeps the relations of oldText that newText restates.
func restated(rels []events.Relation, oldText, newText string) []events.Relation {
	return slices.DeleteFunc(slices.Clone(rels), func(r events.Relation) bool { return !restates(oldText, newText, r) })
}

// restates reports whether newText restates r as oldText stated it.
func restates(oldText, newText string, r events.Relation) bool {
	names := [][]rtoken{rtokens(r.Subject), rtokens(r.Object)}
	object := names[1]
	if len(object) == 0 {
		return false
	}
	var relWords []string
	for _, w := range text.Words(strings.ReplaceAll(r.Predicate, "_", " ")) {
		if !text.Stopword(w) {
			relWords = append(relWords, text.Stem(w))
		}
	}
	news := rsentences(newText, names)
	i, stated := 0, false
	for _, o := range rsentences(oldText, names) {
		cut, states := o.statement(object, relWords)
		switch {
		case i < len(news) && news[i].equal(o.tokens, o.question):
			i++
			stated = stated || states
		case states && cut != nil && i < len(news) && news[i].equal(cut, false):
			i++
			stated = true
		case states:
			return false // a statement dropped or changed
		}
	}
	return stated && i == len(news)
}

// rtoken is a word or a break: a clause break (",", ":", "and", "but"), or a sentence
// end (".", ";", "!", "?").
type rtoken struct {
	word  string
	brk   byte // 0 for a word; ',' for a clause break; '.' or '?' for a sentence end
	inner bool // inside a name of the triple: a break there is the name's
}

// rtokens reads text into words (as substWords reads them) and breaks.
func rtokens(s string) []rtoken {
	var out []rtoken
	var cur []rune
	flush := func() {
		w := strings.Trim(string(cur), "'")
		cur = cur[:0]
		switch {
		case w == "":
		case w == "and" || w == "but":
			out = append(out, rtoken{word: w, brk: ','})
		default:
			out = append(out, rtoken{word: w})
		}
	}
	for _, r := range strings.ToLower(s) {
		switch {
		case r == '\u2019' || r == '\u2018' || r == '\'':
			cur = append(cur, '\'')
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			cur = append(cur, r)
		case r == ',' || r == ':':
			flush()
			out = append(out, rtoken{word: string(r), brk: ','})
		case r == '.' || r == ';' || r == '!':
			flush()
			out = append(out, rtoken{word: string(r), brk: '.'})
		case r == '?':
			flush()
			out = append(out, rtoken{word: "?", brk: '?'})
		case unicode.IsSymbol(r):
			flush()
			out = append(out, rtoken{word: string(r)})
		default:
			flush()
		}
	}
	flush()
	return out
}

// rsentence is one sentence's tokens (its end left out) and whether it asks.
type rsentence struct {
	tokens   []rtoken
	question bool
}

// rsentences splits text into sentences, a break inside a name of names not counted.
func rsentences(s string, names [][]rtoken) []rsentence {
	toks := rtokens(s)
	for _, name := range names {
		for i := 0; len(name) > 0 && i+len(name) <= len(toks); i++ {
			if sameWords(toks[i:i+len(name)], name) {
				for j := i; j < i+len(name); j++ {
					toks[j].inner = true
				}
			}
		}
	}
	var out []rsentence
	var cur []rtoken
	for _, t := range toks {
		if t.inner || (t.brk != '.' && t.brk != '?') {
			cur = append(cur, t)
			continue
		}
		if len(cur) > 0 {
			out = append(out, rsentence{tokens: cur, question: t.brk == '?'})
		}
		cur = nil
	}
	if len(cur) > 0 {
		out = append(out, rsentence{tokens: cur})
	}
	return out
}

// statement is the sentence cut to its statement of the triple (nil: it counts only
// whole), and whether it states it at all.
func (s rsentence) statement(object []rtoken, relWords []string) ([]rtoken, bool) {
	if s.question {
		return nil, false
	}
	clause, objectClause, relClause := 0, -1, -1
	ends := []int{} // the index of each clause break
	for i, t := range s.tokens {
		if t.brk == ',' && !t.inner {
			ends = append(ends, i)
			clause++
			continue
		}
		if objectClause < 0 && i+len(object) <= len(s.tokens) && sameWords(s.tokens[i:i+len(object)], object) {
			objectClause = clause
		}
		if relClause < 0 && t.brk == 0 && slices.Contains(relWords, text.Stem(t.word)) {
			relClause = clause
		}
	}
	if objectClause < 0 {
		return nil, false
	}
	if relClause < 0 {
		return nil, true
	}
	last := max(objectClause, relClause)
	if last >= len(ends) {
		return s.tokens, true
	}
	return s.tokens[:ends[last]], true
}

// equal reports whether the sentence is toks, asking as question says.
func (s rsentence) equal(toks []rtoken, question bool) bool {
	return s.question == question && sameWords(s.tokens, toks)
}

func sameWords(a, b []rtoken) bool {
	return slices.EqualFunc(a, b, func(x, y rtoken) bool { return x.word == y.word })
}
