package extraction

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
)

// What memory.set_from_messages asks the model, and how it reads the answers: the
// extraction prompt and its strict schema, the transcript's windows, and the merge of
// the windows' facts. Pure: pipeline.go makes the calls.

// extractionAnswer is the extraction call's answer.
type extractionAnswer struct {
	Facts []struct {
		Key          string   `json:"key"`
		Value        string   `json:"value"`
		MessageIndex int      `json:"message_index"`
		Tags         []string `json:"tags"`
		About        string   `json:"about"` // "agent": a rule about the agent itself; "" or "user": a fact
	} `json:"facts"`
	Forget []struct {
		Key          string `json:"key"`
		MessageIndex int    `json:"message_index"`
	} `json:"forget"`
}

var extractionSchema = mustSchema("extracted_facts", "The durable facts a conversation states, and the stored memories it asks to forget.",
	object(map[string]any{
		"facts": array(object(map[string]any{
			"key":           map[string]any{"type": "string", "description": "subject.attribute, lower case, never the value"},
			"value":         map[string]any{"type": "string", "description": "the fact, one short sentence"},
			"message_index": map[string]any{"type": "integer", "description": "the [n] of the message that states it"},
			"tags":          array(map[string]any{"type": "string"}),
			"about": map[string]any{"type": "string", "enum": []any{aboutUser, aboutAgent},
				"description": "user: a fact about the user or their world; agent: a rule about how the assistant should work"},
		})),
		"forget": array(object(map[string]any{
			"key":           map[string]any{"type": "string", "description": "the key of a stored memory the user asks to forget"},
			"message_index": map[string]any{"type": "integer"},
		})),
	}))

// What an extracted fact is about (the seeds' about): the user, or the agent itself.
const (
	aboutUser  = "user"
	aboutAgent = "agent"
)

// verificationAnswer is the verifier's answer: one verdict per fact it was shown.
type verificationAnswer struct {
	Verdicts []struct {
		Index   int  `json:"index"`
		Durable bool `json:"durable"`
	} `json:"verdicts"`
}

var verificationSchema = mustSchema("durable_facts", "Which of the listed facts stay true and useful beyond this session.",
	object(map[string]any{
		"verdicts": array(object(map[string]any{
			"index":   map[string]any{"type": "integer"},
			"durable": map[string]any{"type": "boolean"},
		})),
	}))

func object(props map[string]any) map[string]any {
	required := make([]any, 0, len(props))
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		required = append(required, k)
	}
	return map[string]any{"type": "object", "additionalProperties": false, "required": required, "properties": props}
}

func array(items map[string]any) map[string]any {
	return map[string]any{"type": "array", "items": items}
}

func mustSchema(name, description string, doc map[string]any) *llm.Schema {
	s, err := llm.NewSchema(name, description, doc)
	if err != nil {
		panic(err)
	}
	return s
}

const extractionInstructions = `You extract durable facts from a conversation for a long-term memory store.

Rules:
- Keep only facts that will still be true and useful in later conversations: who the user is, their preferences, relationships, circumstances, decisions, commitments with dates. Leave out greetings, small talk, questions, and what the assistant or its tools did.
- key names the subject and the attribute, never the value: "user.home_city", "user.employer", "user.diet", "project.loom.language". Lower case, segments joined by ".", words by "_".
- When a fact is about an attribute a stored memory below already holds, reuse that memory's key exactly, so the new value revises it. Do not repeat a stored memory the conversation does not change.
- value states the fact in one short sentence, in the conversation's language.
- message_index is the [n] of the message that states the fact.
- tags: the namespace's categories below that fit the fact, or none.
- about: "user" for a fact about the user or their world; "agent" for a rule the user gives the assistant about how it should work ("answer in French", "never suggest pork recipes"): such rules are filed for review, not stored as memories.
- forget: when the user asks to forget or delete something, the key of each stored memory it names, with the message_index of the request.`

// extractionPrompt is the system message of one extraction call.
func extractionPrompt(categories []string, existing []*memrow.Row) string {
	var b strings.Builder
	b.WriteString(extractionInstructions)
	b.WriteString("\n\nNamespace categories: ")
	if len(categories) == 0 {
		b.WriteString("(none)")
	} else {
		b.WriteString(strings.Join(categories, ", "))
	}
	b.WriteString("\n\nStored memories (key: value):\n")
	if len(existing) == 0 {
		b.WriteString("(none)\n")
	}
	for _, r := range existing {
		fmt.Fprintf(&b, "- %s: %s\n", r.MemoryKey, clip(memrow.ValueText(r.Value), 300))
	}
	return b.String()
}

const verificationInstructions = `You review facts extracted from a coding session before they are stored as long-term memories.
A fact is durable when it will still be true and useful in a later session: a convention, a decision and its reason, how the project is built or laid out, a preference of the user. It is not durable when it is a status snapshot, housekeeping, a plan not yet carried out, or a narration of what was run.
Answer one verdict per fact, by its index.`

// verificationPrompt lists the facts a verifier pass judges.
func verificationPrompt(facts []*candidate) string {
	var b strings.Builder
	for i, f := range facts {
		fmt.Fprintf(&b, "[%d] %s: %s\n", i, f.key, f.value)
	}
	return b.String()
}

// window is a run of whole messages extracted by one call.
type window struct{ first, last int }

// windows splits a transcript into runs of whole messages of at most limit
// characters each (a message longer than limit is a window of its own).
func windows(msgs []Message, limit int) []window {
	var out []window
	start, size := 0, 0
	for i, m := range msgs {
		n := utf8.RuneCountInString(m.Content)
		if i > start && size+n > limit {
			out = append(out, window{start, i - 1})
			start, size = i, 0
		}
		size += n
	}
	if len(msgs) > 0 {
		out = append(out, window{start, len(msgs) - 1})
	}
	return out
}

// transcript is the user message of one window's call: each message numbered by its
// place in the whole request.
func transcript(msgs []Message, w window) string {
	var b strings.Builder
	for i := w.first; i <= w.last; i++ {
		fmt.Fprintf(&b, "[%d] %s: %s\n", i, msgs[i].Role, msgs[i].Content)
	}
	return b.String()
}

// mergeWindows joins the windows' answers in transcript order: of two statements of
// one key the later stands; a forget of a key retires it unless a later message states
// it again, and a later forget drops an earlier statement. Indexes outside a window
// are the window's last message.
func mergeWindows(ws []window, answers []extractionAnswer) (facts []*candidate, forgets []forgetting) {
	byKey := map[string]*candidate{}
	var order []string // keys as first stated, so facts of one message keep the model's order
	ordered := map[string]bool{}
	forgot := map[string]forgetting{}
	for i, a := range answers {
		w := ws[i]
		at := func(n int) int {
			if n < w.first || n > w.last {
				return w.last
			}
			return n
		}
		for _, f := range a.Facts {
			c := &candidate{rawKey: f.Key, value: strings.TrimSpace(f.Value), msg: at(f.MessageIndex), tags: f.Tags,
				aboutAgent: f.About == aboutAgent}
			c.key = normalizeKey(f.Key, c.value)
			if prev, ok := byKey[c.key]; ok && c.key != "" && prev.msg > c.msg {
				continue
			}
			if g, ok := forgot[c.key]; ok && g.msg > c.msg {
				continue
			}
			delete(forgot, c.key)
			if c.key == "" {
				facts = append(facts, c) // dropped later as invalid, and listed
				continue
			}
			if !ordered[c.key] {
				ordered[c.key] = true
				order = append(order, c.key)
			}
			byKey[c.key] = c
		}
		for _, g := range a.Forget {
			k := normalizeKey(g.Key, "")
			if k == "" {
				continue
			}
			g := forgetting{key: k, msg: at(g.MessageIndex)}
			if c, ok := byKey[k]; ok {
				if c.msg > g.msg {
					continue
				}
				delete(byKey, k)
			}
			forgot[k] = g
		}
	}
	for _, k := range order {
		if c, ok := byKey[k]; ok {
			facts = append(facts, c)
		}
	}
	sort.SliceStable(facts, func(i, j int) bool { return facts[i].msg < facts[j].msg })
	for _, g := range forgot {
		forgets = append(forgets, g)
	}
	sort.Slice(forgets, func(i, j int) bool { return forgets[i].key < forgets[j].key })
	return facts, forgets
}

// clip cuts s to at most n characters.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
