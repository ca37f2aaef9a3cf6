package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Turns is what a memory.turns_observed record carries: turns of one conversation
// (one agent, user and session) that Loom keeps as evidence. Who and when are plain,
// the user by reference; what was said (each turn's text and speaker) is sealed under
// the turns' data key, which Loom keeps on the evidence rows and destroys with them
// (an erasure), so the kept topic never yields the text again.
type Turns struct {
	Agent     string `json:"agent"`
	UserRef   string `json:"user_ref"` // UserRef of the user id
	SessionID string `json:"session_id"`
	// Source is what kept them: "observe" (memory.observe), "extraction"
	// (memory.set_from_messages' inputs) or "import" (memory.import's items).
	Source string     `json:"source"`
	Items  []TurnMeta `json:"items"`
	Sealed *Sealed    `json:"sealed"` // TurnTexts, in Items' order
}

// TurnMeta is one turn's plain fields.
type TurnMeta struct {
	TurnID       string    `json:"turn_id"`
	Role         string    `json:"role"`
	MessageIndex int       `json:"message_index"`
	OccurredAt   time.Time `json:"occurred_at"`
}

// TurnText is one turn's sealed fields.
type TurnText struct {
	Text    string `json:"text"`
	Speaker string `json:"speaker,omitempty"`
}

// TurnsAAD is the additional data a record's turns are sealed with, so they cannot be
// moved to another record.
func TurnsAAD(recordID string) string { return "turns/" + recordID }

// SealTurns seals the texts of a record's turns under its data key.
func SealTurns(dataKey []byte, recordID string, texts []TurnText) (*Sealed, error) {
	b, err := json.Marshal(texts)
	if err != nil {
		return nil, err
	}
	return sealBytes(dataKey, TurnsAAD(recordID), b)
}

// OpenTurns opens the texts of a record's turns. Every failure wraps ErrSealBroken.
func OpenTurns(dataKey []byte, recordID string, s *Sealed) ([]TurnText, error) {
	b, err := openBytes(dataKey, TurnsAAD(recordID), s)
	if err != nil {
		return nil, err
	}
	var out []TurnText
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSealBroken, err)
	}
	return out, nil
}

func validateTurns(t *Turns) error {
	switch {
	case len(t.Items) == 0:
		return errors.New("no items")
	case t.Sealed == nil:
		return errors.New("no sealed texts")
	case t.UserRef != "" && !isSHA256Hex(t.UserRef):
		return fmt.Errorf("user_ref %q is not 64 lowercase hex digits", t.UserRef)
	}
	for _, it := range t.Items {
		if it.TurnID == "" || it.Role == "" || it.MessageIndex < 0 {
			return fmt.Errorf("item %+v: turn_id and role are required, message_index >= 0", it)
		}
	}
	return validateSealed(t.Sealed)
}
