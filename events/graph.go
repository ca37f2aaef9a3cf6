package events

import "time"

// Cardinalities a namespace declares for a relation's predicate.
const (
	// CardinalitySingle: a subject has one current value; a newer value closes the
	// older one when it starts.
	CardinalitySingle = "single"
	// CardinalityMulti: a subject may hold any number of values at once.
	CardinalityMulti = "multi"
)

// Relation is one fact a writer named on a revision: subject, predicate, object, and
// the interval it holds in when the writer gave one. It travels sealed, in Content.
type Relation struct {
	Subject   string     `json:"subject"`
	Predicate string     `json:"predicate"`
	Object    string     `json:"object"`
	ValidFrom *time.Time `json:"valid_from,omitempty"`
	ValidTo   *time.Time `json:"valid_to,omitempty"`
	// Cardinality is the predicate's cardinality as the namespace declared it when the
	// revision was committed, so the graph folds from the topic alone: a replay under
	// a changed configuration builds the same graph.
	Cardinality string `json:"cardinality,omitempty"`
}
