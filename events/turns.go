package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Turns is what a memory.turns_observed record carries: turns of one conversation
// (one agent, user and session) that Loom keeps as evidence. Who and when are plain,
// by reference; what was said (each turn's text and speaker) is sealed under the
// turn's own data key, which Loom keeps on the turn's evidence row only and destroys
// with it (an erasure, a redaction of a memory drawn from it), so the kept topic never
// yields that turn's text again.
//
// From version 3 on the agent and the session id are sealed too, in each turn's
// TurnText, and AgentRef and SessionRef name them in the clear. Each turn, not a
// header of the record: the record has no key of its own, only its turns' keys, and
// sealed with every turn the identity is readable exactly while some turn of the
// record is (OpenedTurns lifts it back in).
type Turns struct {
	Agent      string `json:"agent,omitempty"`       // versions 1 and 2 only
	AgentRef   string `json:"agent_ref,omitempty"`   // version 3 on: AgentRef of the agent
	UserRef    string `json:"user_ref"`              // UserRef of the user id
	SessionID  string `json:"session_id,omitempty"`  // versions 1 and 2 only
	SessionRef string `json:"session_ref,omitempty"` // version 3 on: SessionRef of the session id
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
	// Added in version 3: the conversation's agent and session id (Turns.AgentRef and
	// SessionRef name them in the clear).
	Agent     string `json:"agent,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// OpenedTurns fills in a version 3 record's agent and session id from one of its
// opened turns, so that a follower reads one shape whatever version a record was
// written in. A record written before carries both already and is left as it is.
func OpenedTurns(t *Turns, text *TurnText) {
	if t == nil || text == nil {
		return
	}
	if t.Agent == "" {
		t.Agent = text.Agent
	}
	if t.SessionID == "" {
		t.SessionID = text.SessionID
	}
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

func validateTurns(version int, t *Turns) error {
	switch {
	case len(t.Items) == 0:
		return errors.New("no items")
	case t.UserRef != "" && !isSHA256Hex(t.UserRef):
		return fmt.Errorf("user_ref %q is not 64 lowercase hex digits", t.UserRef)
	}
	if err := validateWriter(version, t.Agent, t.SessionID, t.AgentRef, t.SessionRef); err != nil {
		return err
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
