package bench

import (
	"context"
	"fmt"
	"strings"

	"github.com/loomplane/loom/client"
)

// verdictQueries is how many answerable and how many no-answer questions the search
// scenario asks each path of each namespace to count its abstentions.
const verdictQueries = 20

// unusedWords are English words, which the loaded values (made-up syllable words)
// never use: a question of them has no answer in the namespace.
var unusedWords = strings.Fields(`invoice harbour violin passport dentist glacier orchestra
	umbrella mortgage volcano recipe bicycle library tournament vaccine telescope`)

// verdictCounts are a path's searches judged by their verdicts: a search abstains
// when its verdict is not ok. Precision and recall are reported apart, as the quality
// suite reports them: precision alone hides the answerable questions thrown away,
// recall alone the no-answer questions answered.
type verdictCounts struct {
	noAnswer, answerable      int
	trueAbstain, falseAbstain int
}

// precision is the share of abstentions that fell on no-answer questions (0 when
// nothing abstained: the counts beside it say so).
func (v verdictCounts) precision() float64 {
	if v.trueAbstain+v.falseAbstain == 0 {
		return 0
	}
	return float64(v.trueAbstain) / float64(v.trueAbstain+v.falseAbstain)
}

// recall is the share of no-answer questions that abstained.
func (v verdictCounts) recall() float64 {
	if v.noAnswer == 0 {
		return 0
	}
	return float64(v.trueAbstain) / float64(v.noAnswer)
}

// countVerdicts asks path p verdictQueries answerable questions (four words of a
// loaded value) and as many no-answer ones (four English words), outside any clock, and
// adds the abstain precision and recall rows to res.
func (r *runner) countVerdicts(ctx context.Context, res *ScenarioResult, p searchPath, ns string, size int, values []string) error {
	var v verdictCounts
	for i := range verdictQueries {
		asked := strings.Join(strings.Fields(values[i*len(values)/verdictQueries])[:4], " ")
		none := make([]string, 4)
		for j := range none {
			none[j] = unusedWords[r.rng.IntN(len(unusedWords))]
		}
		for _, q := range []struct {
			text     string
			answered bool
		}{{asked, true}, {strings.Join(none, " "), false}} {
			ans, err := p.api.Search(ctx, ns, client.SearchRequest{Query: q.text, TopK: searchTopK})
			if err != nil {
				return fmt.Errorf("verdict search of %s (%s): %w", ns, p.name, err)
			}
			abstained := ans.Verdict != client.VerdictOK
			switch {
			case q.answered:
				v.answerable++
				if abstained {
					v.falseAbstain++
				}
			default:
				v.noAnswer++
				if abstained {
					v.trueAbstain++
				}
			}
		}
	}
	name := fmt.Sprintf("%d memories, %s, %d answerable and %d no-answer questions", size, p.name, v.answerable, v.noAnswer)
	res.Rows = append(res.Rows, plainRow(name, "abstain precision", round(v.precision(), 3)),
		plainRow(name, "abstain recall", round(v.recall(), 3)),
		plainRow(name, "answerable abstained", float64(v.falseAbstain)),
		plainRow(name, "no-answer abstained", float64(v.trueAbstain)))
	return nil
}
