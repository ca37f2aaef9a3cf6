package workers

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
)

// The conflict resolver's call (memory-architecture, "The call"): one prompt per
// judged row naming each peer p1..pN with its key, cosine, when its statement holds
// and where it comes from, and a strict JSON answer with one entry per peer. Pure.

// promptValueChars is how much of a value the prompt shows.
const promptValueChars = 700

// clusterPeer is one peer in a judged row's cluster.
type clusterPeer struct {
	row      *memrow.Row
	cosine   float64
	asserted time.Time // when its value was first asserted (the order a retirement checks)
}

// judgeSchema is the answer's shape.
var judgeSchema = llm.MustSchema("conflict_judgements", "One judgement per peer of the judged statement.", map[string]any{
	"type": "object", "additionalProperties": false, "required": []string{"judgements"},
	"properties": map[string]any{
		"judgements": map[string]any{"type": "array", "items": map[string]any{
			"type": "object", "additionalProperties": false,
			"required": []string{"peer", "reason", "same_entity", "same_attribute", "verdict", "confidence"},
			"properties": map[string]any{
				"peer":           map[string]any{"type": "string", "description": "the peer's label: p1, p2, ..."},
				"reason":         map[string]any{"type": "string", "description": "one short sentence"},
				"same_entity":    map[string]any{"type": "boolean"},
				"same_attribute": map[string]any{"type": "boolean"},
				"verdict":        map[string]any{"type": "string", "enum": judgeVerdicts()},
				"confidence":     map[string]any{"type": "number", "description": "0 to 1"},
			},
		}},
	},
})

const judgeRubric = `You judge whether stored memories conflict. You are given one judged statement (NEW) and its peers p1..pN, stored statements about the same subject.
For each peer, decide:
- same_entity: NEW and the peer are about the same thing (person, object, project, task).
- same_attribute: they state the same attribute of it (where someone lives, a deadline, a preference).
- verdict:
  update: NEW replaces the peer: same entity and attribute, a new value, and NEW is the later statement.
  contradiction: both cannot hold, and NEW is not clearly the later statement.
  elaboration: NEW adds detail the peer does not contradict.
  restatement: NEW says what the peer says.
  related: same topic, no conflict.
  unrelated: different things.
- confidence: how sure you are, 0 to 1.
Only call it an update when NEW is the later statement. A value tied to one session's task (a task id, a deadline, a build) stated in another session is a different entity.
Answer with one entry per peer, naming it by its label.`

// judgePrompt is the call's messages.
func judgePrompt(judged *memrow.Row, judgedAsserted time.Time, peers []clusterPeer) []llm.Message {
	var b strings.Builder
	fmt.Fprintf(&b, "NEW (key %q, stated %s):\n%s\n\nPeers:\n", judged.MemoryKey, statedAt(judged, judgedAsserted),
		cut(memrow.ValueText(judged.Value), promptValueChars))
	for i, p := range peers {
		fmt.Fprintf(&b, "p%d (key %q, cosine %.2f, stated %s, %s):\n%s\n\n", i+1, p.row.MemoryKey, p.cosine,
			statedAt(p.row, p.asserted), originOf(judged, p.row), cut(memrow.ValueText(p.row.Value), promptValueChars))
	}
	return []llm.Message{{Role: llm.RoleSystem, Content: judgeRubric}, {Role: llm.RoleUser, Content: b.String()}}
}

// statedAt is when a statement holds, as the prompt shows it: the writer's date of
// the fact when it gave one, else when it was asserted.
func statedAt(r *memrow.Row, asserted time.Time) string {
	if r.ValidAt != nil {
		return "for " + r.ValidAt.UTC().Format("2006-01-02")
	}
	return asserted.UTC().Format(time.RFC3339)
}

// originOf says where a peer comes from, seen from the judged row.
func originOf(judged, peer *memrow.Row) string {
	switch {
	case peer.Agent != judged.Agent:
		return "from another agent"
	case peer.SessionID == judged.SessionID:
		return "from NEW's session"
	}
	return "from another session of NEW's agent"
}

func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

var peerLabel = regexp.MustCompile(`^\[?p(\d+)\]?$`)

// parseJudgements reads an answer leniently: each entry that names one of the peers
// (p2, [p2], its memory id, or "key <key>" when no other peer has that key) and has
// every field of the right type is kept, the first for each peer; any other entry is
// dropped and its peer left unresolved. It returns the entries by peer index.
func parseJudgements(content string, peers []clusterPeer) map[int]peerJudgement {
	var ans struct {
		Judgements []map[string]json.RawMessage `json:"judgements"`
	}
	if json.Unmarshal([]byte(content), &ans) != nil {
		return nil
	}
	out := map[int]peerJudgement{}
	for _, e := range ans.Judgements {
		var ref, verdict, reason string
		var sameEntity, sameAttribute bool
		var confidence float64
		if json.Unmarshal(e["peer"], &ref) != nil || json.Unmarshal(e["verdict"], &verdict) != nil ||
			json.Unmarshal(e["reason"], &reason) != nil || json.Unmarshal(e["same_entity"], &sameEntity) != nil ||
			json.Unmarshal(e["same_attribute"], &sameAttribute) != nil || json.Unmarshal(e["confidence"], &confidence) != nil {
			continue
		}
		if !slices.Contains(judgeVerdicts(), verdict) || confidence < 0 || confidence > 1 {
			continue
		}
		i, ok := peerIndex(strings.TrimSpace(ref), peers)
		if !ok {
			continue
		}
		if _, seen := out[i]; seen {
			continue
		}
		out[i] = peerJudgement{Verdict: judgeVerdict(verdict), SameEntity: sameEntity, SameAttribute: sameAttribute, Confidence: confidence}
	}
	return out
}

// peerIndex resolves how an answer names a peer.
func peerIndex(ref string, peers []clusterPeer) (int, bool) {
	if m := peerLabel.FindStringSubmatch(strings.ToLower(ref)); m != nil {
		n, err := strconv.Atoi(m[1])
		if err == nil && n >= 1 && n <= len(peers) {
			return n - 1, true
		}
		return 0, false
	}
	for i, p := range peers {
		if p.row.MemoryID == ref {
			return i, true
		}
	}
	if key, ok := strings.CutPrefix(ref, "key "); ok {
		found := -1
		for i, p := range peers {
			if p.row.MemoryKey == strings.TrimSpace(key) {
				if found >= 0 {
					return 0, false // another peer has that key: ambiguous
				}
				found = i
			}
		}
		return found, found >= 0
	}
	return 0, false
}
