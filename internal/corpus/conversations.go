// Package corpus holds the corpora more than one measurement draws on: the conversation
// corpus (tests/quality/conversations.json, written by tests/quality/genconv), which the
// quality suite measures search over and `loomd bench --scenario conversations` times,
// both from this one decoding; and the made-up vocabulary of the bench's values (Words).
package corpus

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Conversations is the corpus: dialogues of dated sessions, and questions about them
// in two halves (tuning and held_out).
type Conversations struct {
	Seed      uint64     `json:"seed"`
	Dialogues []Dialogue `json:"dialogues"`
	Questions []Question `json:"questions"`
}

// Dialogue is one conversation; each is written to a namespace of its own.
type Dialogue struct {
	ID       string    `json:"id"`
	Half     string    `json:"half"`
	Sessions []Session `json:"sessions"`
}

// Session is one dated sitting of a dialogue.
type Session struct {
	Date  string `json:"date"`
	Turns []Turn `json:"turns"`
}

// Turn is one utterance, stored as a memory valid at its session's time.
type Turn struct {
	Key     string    `json:"key"`
	Value   string    `json:"value"`
	ValidAt time.Time `json:"valid_at"`
}

// Question is one question about a dialogue and the turns that answer it (none for a
// no_answer question).
type Question struct {
	ID       string `json:"id"`
	Half     string `json:"half"`
	Dialogue string `json:"dialogue"`
	Kind     string `json:"kind"`
	Query    string `json:"query"`
	// ReferenceTime is the "now" the question is asked at (RFC 3339), as the corpus
	// writes it; empty when the question names no relative date.
	ReferenceTime string   `json:"reference_time"`
	Expected      []string `json:"expected"`
}

// ReferenceAt is ReferenceTime parsed; the zero time when the question has none.
func (q Question) ReferenceAt() (time.Time, error) {
	if q.ReferenceTime == "" {
		return time.Time{}, nil
	}
	at, err := time.Parse(time.RFC3339Nano, q.ReferenceTime)
	if err != nil {
		return time.Time{}, fmt.Errorf("question %s: reference_time: %w", q.ID, err)
	}
	return at, nil
}

// ReadConversations reads the corpus at path; one that holds no dialogue or no
// question is an error.
func ReadConversations(path string) (Conversations, error) {
	var c Conversations
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read the conversation corpus: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("read the conversation corpus %s: %w", path, err)
	}
	if len(c.Dialogues) == 0 || len(c.Questions) == 0 {
		return c, fmt.Errorf("the conversation corpus %s holds no dialogue or no question", path)
	}
	return c, nil
}
