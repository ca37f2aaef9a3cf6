package embed

import "strings"

// Lexical reports whether a model's similarities only echo shared words and letter
// runs (the hash embedder): a caller that wants meaning from a similarity, not
// wording, cannot ask such a model.
func Lexical(model string) bool { return strings.HasPrefix(model, "hash-") }
