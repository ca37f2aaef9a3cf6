package memrow

import "strings"

// stateVerbs are the verbs of a state whose tense a predicate's first word may carry,
// each as its forms: the present (third person, the relation's key), then the base,
// the past and the progressive. Only states: a past form of an event ("moved_to",
// "joined") says when something happened, not that it stopped holding, so it keeps
// its own relation, and so does a verb whose past form is mostly an event's
// ("attended", "held", "led_to", "managed_to", "reported").
var stateVerbs = [][4]string{
	{"lives", "live", "lived", "living"},
	{"works", "work", "worked", "working"},
	{"resides", "reside", "resided", "residing"},
	{"studies", "study", "studied", "studying"},
	{"teaches", "teach", "taught", "teaching"},
	{"owns", "own", "owned", "owning"},
	{"has", "have", "had", "having"},
	{"uses", "use", "used", "using"},
	{"likes", "like", "liked", "liking"},
	{"loves", "love", "loved", "loving"},
	{"prefers", "prefer", "preferred", "preferring"},
	{"belongs", "belong", "belonged", "belonging"},
	{"knows", "know", "knew", "knowing"},
}

// verbForm is what one word says of a state verb: the relation's key word and
// whether the word is a past form.
type verbForm struct {
	key  string
	past bool
}

var verbForms = func() map[string]verbForm {
	m := map[string]verbForm{"is": {"is", false}, "am": {"is", false}, "are": {"is", false},
		"was": {"is", true}, "were": {"is", true}}
	for _, v := range stateVerbs {
		m[v[0]], m[v[1]], m[v[3]] = verbForm{v[0], false}, verbForm{v[0], false}, verbForm{v[0], false}
		m[v[2]] = verbForm{v[0], true}
	}
	return m
}()

// Relation folds a canonical predicate's tense into the relation it names, so a
// past form and the present compete as values of one relation (memory-architecture
// "Which value is newer"): "lived_in", "live_in" and "lives_in" are lives_in,
// "was_based_in" is is_based_in, "used_to_work_at" is works_at. past reports that the
// predicate's own verb is a past form of a state, which orders its undated value as
// the older one within a write. Any other predicate is its own relation, as stated.
func Relation(predicate string) (key string, past bool) {
	words := strings.Split(predicate, "_")
	if len(words) > 2 && words[0] == "used" && words[1] == "to" {
		if f, ok := verbForms[words[2]]; ok && !f.past {
			return strings.Join(append([]string{f.key}, words[3:]...), "_"), true
		}
		return predicate, false // a past habit ("used_to_smoke"), no state of ours
	}
	f, ok := verbForms[words[0]]
	if !ok {
		return predicate, false
	}
	words[0] = f.key
	return strings.Join(words, "_"), f.past
}

// RelationKey is the relation a predicate names, its tense folded (Relation).
func RelationKey(predicate string) string {
	k, _ := Relation(Predicate(predicate))
	return k
}
