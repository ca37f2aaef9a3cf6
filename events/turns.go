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
// the turn's own data key, which Loom keeps on the turn's evidence row only and
// destroys with it (an erasure, a redaction of a memory drawn from it), so the kept
// topic never yields that turn's text again.
type Turns struct {
	Agent     string `json:"agent"`
	UserRef   string `json:"user_ref"` // UserRef of the user id
	SessionID string `json:"session_id"`
	// Source is what kept them: "observe" (memory.observe), "extraction"
	// (memory.set_from_messages' inputs) or "import" (memory.import's items).
	Source string     `json:"source"`
	Items  []TurnMeta `json:"items"`
}

// TurnMeta is one turn's plain fields.
type TurnMeta struct {
	TurnID       string    `json:"turn_id"`
	Role         string    `json:"role"`
	MessageIndex int       `json:"message_index"`
	OccurredAt   time.Time `json:"occurred_at"`
	Sealed       *Sealed   `json:"sealed"` // its TurnText, under its own data key
}

// TurnText is one turn's sealed fields.
type TurnText struct {
	Text    string `json:"text"`
	Speaker string `json:"speaker,omitempty"`
}

// TurnAAD is the additional data a turn is sealed with, so its sealed text cannot be
// moved to another turn or record.
func TurnAAD(recordID, turnID string) string { return "turn/" + recordID + "/" + turnID }

// SealTurn seals a turn's text under its data key.
func SealTurn(dataKey []byte, recordID, turnID string, text TurnText) (*Sealed, error) {
	b, err := json.Marshal(text)
	if err != nil {
		return nil, err
	}
	return sealBytes(dataKey, TurnAAD(recordID, turnID), b)
}

// OpenTurn opens a turn's text. Every failure wraps ErrSealBroken.
func OpenTurn(dataKey []byte, recordID, turnID string, s *Sealed) (*TurnText, error) {
	b, err := openBytes(dataKey, TurnAAD(recordID, turnID), s)
	if err != nil {
		return nil, err
	}
	var out TurnText
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSealBroken, err)
	}
	return &out, nil
}

func validateTurns(t *Turns) error {
	switch {
	case len(t.Items) == 0:
		return errors.New("no items")
	case t.UserRef != "" && !isSHA256Hex(t.UserRef):
		return fmt.Errorf("user_ref %q is not 64 lowercase hex digits", t.UserRef)
	}
	for _, it := range t.Items {
		if it.TurnID == "" || it.Role == "" || it.MessageIndex < 0 || it.Sealed == nil {
			return fmt.Errorf("item %s: turn_id, role and sealed are required, message_index >= 0", it.TurnID)
		}
		if err := validateSealed(it.Sealed); err != nil {
			return fmt.Errorf("item %s: sealed: %v", it.TurnID, err)
		}
	}
	return nil
}
