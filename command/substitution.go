package command

import (
	"strings"
	"unicode"
)

// The templated-substitution rule behind newest_wins (memory-architecture, "Revisions",
// the Words paragraph): two statements pair, the newer retiring the older, only when
// they share their beginning and differ in the span that ends them. Where words alone
// cannot tell an update from two facts, the rule does not pair: a missed update is
// safer than a wrong supersession, which would retire the update row itself.

// Word lists of the major languages the seed's examples use. Sets overlap across
// languages ("a" is an English article and a Spanish preposition); each word is listed
// where its most common role puts it.
var (
	substCopulas = wordSet(`is are was were am be been est sont était étaient ist sind war waren es son era eran
		está están è sono era é são foi является являются был была были это`)
	substHaveVerbs = wordSet(`have has had hat habe haben hatte ont avait tiene tienen tengo tenía ho ha hanno aveva
		tem tenho têm есть имеет имею`)
	substArticles = wordSet(`a an the le la les un une der die das den dem des ein eine einen einem el los las una il lo gli
		um uma os`)
	substPrepositions = wordSet(`in at on of for from to with by near into onto under over about after before since until
		à au aux de du dans chez sur pour avec par en im am an auf bei mit von zu nach aus für del con por para di da nel
		nella em no na do в во на у с из к по от для под над`)
	// Possessive determiners: each names an attribute with the noun after it ("my name").
	substPossessives = wordSet(`my your his her its our their mon ma mes ton ta tes son sa ses notre votre leur mein meine
		dein deine sein seine ihr ihre unser unsere mi mis tu tus su sus mio mia tuo tua suo sua meu minha мой моя моё мои
		твой твоя его её их наш наша`)
)

func wordSet(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields(s) {
		out[w] = true
	}
	return out
}

// substWords are a statement's words as the rule reads them (rtokens): lower-cased
// runs of letters, digits and combining marks (a vowel sign or virama stays in its
// word), an apostrophe inside a word kept (a curly one read as straight), and any
// symbol (an emoji, a sign) a word of its own. Other punctuation separates; a comma or
// dot inside a name ("Austin, Texas", "1,000") is no word of either statement.
func substWords(s string) []string {
	var out []string
	for _, t := range rtokens(s) {
		if t.brk == 0 || t.word == "and" || t.word == "but" {
			out = append(out, t.word)
		}
	}
	return out
}

// templatedSubstitution reports whether two statements share a template and differ
// in the one short span that ends them (≤ 4 words each, after ≥ 2 shared words): the
// same subject and predicate, another object ("the user lives in Lisbon" / "the user
// lives in Berlin").
func templatedSubstitution(a, b string) bool {
	wa, wb := substWords(a), substWords(b)
	p := 0
	for p < len(wa) && p < len(wb) && wa[p] == wb[p] {
		p++
	}
	q := 0
	for q < len(wa)-p && q < len(wb)-p && wa[len(wa)-1-q] == wb[len(wb)-1-q] {
		q++
	}
	sa, sb := wa[p:len(wa)-q], wb[p:len(wb)-q]
	if p < 2 || len(sa) < 1 || len(sb) < 1 || len(sa) > 4 || len(sb) > 4 {
		return false
	}
	prefix := wa[:p]
	// A span carrying the copula holds a subject of its own ("The capital of Soviet
	// Union is Moscow" / "The capital of Italy is Rome").
	if anyIn(sa, substCopulas) || anyIn(sb, substCopulas) {
		return false
	}
	last := prefix[len(prefix)-1]
	// A shared ending of two words or more is the predicate's object ("lives in London"
	// / "works in London"), unless the beginning ends in an article (its words are the
	// object's head: "drives a red sports car" / "… a blue sports car"), a preposition
	// or a copula (a detail both keep: "I work at Acme in London" / "… at Globex in
	// London"). One shared word is the object's head ("prefers dark mode" / "… light
	// mode").
	if q >= 2 && !substArticles[last] && !substPrepositions[last] && !substCopulas[last] && !substHaveVerbs[last] {
		return false
	}
	// After a bare name and a copula or "have" verb, the spans are two attributes
	// ("Wang Xiaoming est âgé de 28 ans" / "… est ingénieur logiciel", "У меня есть
	// собака" / "… кошка"), unless both are numbers; a possessive with a noun after it
	// names the attribute the spans are values of ("Italy's capital is Rome" / "…
	// Milan"), as an article does ("the capital of France is …").
	if verb := copulaAt(prefix); verb >= 0 && !namesAttribute(prefix[:verb]) && !(numbers(sa) && numbers(sb)) {
		return false
	}
	return true
}

// copulaAt is the index of the copula or "have" verb the prefix ends in (articles after
// it skipped: "I am a …"), -1 when it ends otherwise.
func copulaAt(prefix []string) int {
	i := len(prefix) - 1
	for i >= 0 && substArticles[prefix[i]] {
		i--
	}
	if i >= 0 && (substCopulas[prefix[i]] || substHaveVerbs[prefix[i]]) {
		return i
	}
	return -1
}

// namesAttribute reports whether the words before a copula name an attribute rather
// than a bare name: an article, or a possessive with a noun after it. A possessive as
// the last word before the copula is a name ("User thinks Macy's is expensive").
func namesAttribute(subject []string) bool {
	for i, w := range subject {
		if substArticles[w] {
			return true
		}
		if i < len(subject)-1 && (substPossessives[w] || strings.HasSuffix(w, "'s") || strings.HasSuffix(w, "s'")) {
			return true
		}
	}
	return false
}

func anyIn(words []string, set map[string]bool) bool {
	for _, w := range words {
		if set[w] {
			return true
		}
	}
	return false
}

// numbers reports whether every word of a span is a number.
func numbers(words []string) bool {
	for _, w := range words {
		for _, r := range w {
			if !unicode.IsDigit(r) {
				return false
			}
		}
	}
	return true
}
