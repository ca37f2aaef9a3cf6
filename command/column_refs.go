package command

import (
	"fmt"

	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/memrow"
)

// columnRefs are a row's writer identity as the memory tables store it (migrations
// 155, 171, 173): its user, agent, session and key by reference under the org's user
// reference key. The commit computes them here, where it holds the key already, and
// binds them: in SQL each of a write's statements unwrapped the key again and ran its
// HMACs (loom.writer_refs, loom.user_ref, loom.named_user). They are the values
// loom.user_ref, agent_ref, session_ref and key_ref compute; "" and "-" (no user,
// agent or session) stay as they are.
type columnRefs struct{ user, agent, session, key string }

// columnRefsOf names id's user, agent, session and key by reference under
// userRefKey, the key of id's org.
func columnRefsOf(userRefKey []byte, id memrow.Identity) (columnRefs, error) {
	var r columnRefs
	var err error
	r.user = id.UserID
	if id.UserID != "" && id.UserID != "-" {
		if r.user, err = events.UserRef(userRefKey, id.UserID); err != nil {
			return r, fmt.Errorf("name the row's user by reference: %w", err)
		}
	}
	if r.agent, err = events.AgentRef(userRefKey, id.Agent); err != nil {
		return r, fmt.Errorf("name the row's agent by reference: %w", err)
	}
	if r.session, err = events.SessionRef(userRefKey, id.SessionID); err != nil {
		return r, fmt.Errorf("name the row's session by reference: %w", err)
	}
	if r.key, err = events.KeyRef(userRefKey, id.MemoryKey); err != nil {
		return r, fmt.Errorf("name the row's key by reference: %w", err)
	}
	return r, nil
}
