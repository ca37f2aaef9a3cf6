package bench

import (
	"math/rand/v2"

	"github.com/loomplane/loom/internal/corpus"
)

// words is the made-up vocabulary of the bench's values (corpus.Words).
var words = corpus.Words

// sentence is ten words of the vocabulary.
func sentence(rng *rand.Rand) string { return corpus.Sentence(rng) }
