package command

import "testing"

// The seed's own examples of the templated-substitution rule (memory-architecture,
// "Revisions", Words), the fragments completed into statements of one subject.
func TestTemplatedSubstitutionFollowsTheSeedsExamples(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		// Different subjects share their ending.
		{"Basketball was created in the country of Soviet Union", "Club Nouveau was created in the country of Soviet Union", false},
		// The differing span carries the copula.
		{"The capital of Soviet Union is Moscow", "The capital of Italy is Rome", false},
		// A shared ending of two words or more after a beginning that does not end in a
		// preposition, copula or article is the predicate's object, in any language.
		{"the user lives in London", "the user works in London", false},
		{"мой брат живёт в Москве", "мой брат работает в Москве", false},
		{"mon frère habite à Paris", "mon frère travaille à Paris", false},
		// One shared word is the object's head.
		{"the user prefers dark mode", "the user prefers light mode", true},
		// So are more after an article.
		{"the user drives a red sports car", "the user drives a blue sports car", true},
		// A shared ending from a preposition on is a detail both keep.
		{"I work at Acme in London", "I work at Globex in London", true},
		// After a bare name and a copula or "have" verb: two attributes, unless numbers.
		{"Wang Xiaoming est âgé de 28 ans", "Wang Xiaoming est ingénieur logiciel", false},
		{"У меня есть собака", "У меня есть кошка", false},
		{"I live in Москва", "I live in Berlin", true},
		{"Wang Xiaoming is 28", "Wang Xiaoming is 29", true},
		// A possessive with a noun after it names an attribute; as the last word before
		// the copula it is a name.
		{"Italy's capital is Rome", "Italy's capital is Milan", true},
		{"Italy\u2019s capital is Rome", "Italy's capital is Milan", true},
		{"User thinks Macy's is expensive", "User thinks Macy's is crowded", false},
		// The rule as it stood keeps its cases.
		{"the user lives in Lisbon", "the user lives in Berlin", true},
		{"the user lives in Lisbon, Portugal", "the user lives in New York City", true},
		{"the user lives in Lisbon", "the cat sleeps all day", false},
		{"Lisbon", "Berlin", false},
		{"the user lives in Lisbon", "the user lives in Lisbon", false},
		{"alice's home city is Lisbon", "alice's home city is Berlin", true},
		{"my name is Alice", "my name is Bob", true},
	} {
		if got := templatedSubstitution(c.a, c.b); got != c.want {
			t.Errorf("templatedSubstitution(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := templatedSubstitution(c.b, c.a); got != c.want {
			t.Errorf("templatedSubstitution(%q, %q) = %v, want %v (the pair reversed)", c.b, c.a, got, c.want)
		}
	}
}
