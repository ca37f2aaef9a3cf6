package mem0

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/loomplane/loom/client"
)

// inMem0Words answers Loom's refusal of a field the facade filled (memory.bulk_set's
// entries[i].value, memory.update_by_id's value) as the refusal of the mem0 field it
// came from, named by mem0's: the status and code stay Loom's, the message is prefixed
// with the mem0 field, as the facade's own refusals are. A refusal of no field, one
// that may succeed later, or of a field mem0Field does not name is answered as it came.
func inMem0Words(err error, mem0Field func(loomField string) string) error {
	e, ok := client.AsError(err)
	if !ok || e.Field == "" || e.Retryable {
		return err
	}
	field := mem0Field(e.Field)
	if field == "" {
		return err
	}
	msg := field + " " + e.Message
	if e.Code == client.CodeCharLimitExceeded {
		msg += asStored
	}
	return &httpError{status: e.Status, code: string(e.Code), msg: msg, field: field}
}

// asStored says what Loom measured: the facade stores a message's text with its role
// and metadata (docs/mem0.md), so a length counts them too.
const asStored = " (as stored, with its role and metadata)"

// bulkEntryField is memory.bulk_set's entries[i].<field>.
var bulkEntryField = regexp.MustCompile(`^entries\[(\d+)\]\.(\w+)$`)

// addFields names the fields of a verbatim add's memory.bulk_set entries by the add's
// own: entry i is msgs[i], the message at msgs[i].index of the request (the empty
// messages the facade leaves out are counted).
func addFields(msgs []textMessage) func(string) string {
	return func(loomField string) string {
		m, field, ok := keptMessage(bulkEntryField, loomField, msgs)
		if !ok {
			return ""
		}
		switch field {
		case "value":
			return fmt.Sprintf("messages[%d].content", m.index)
		case "valid_at":
			return "timestamp"
		case "valid_to":
			return "expiration_date"
		}
		return ""
	}
}

// updateFields names memory.update_by_id's value by an update's text, prefixed by the
// batch entry's place when it is one (memories[i].text).
func updateFields(prefix string) func(string) string {
	return func(loomField string) string {
		if loomField != "value" {
			return ""
		}
		return prefix + "text"
	}
}

// messageField is memory.set_from_messages' messages[i].<field>.
var messageField = regexp.MustCompile(`^messages\[(\d+)\]\.(\w+)$`)

// inferFields names the fields of an inferred add's memory.set_from_messages by the
// add's own: Loom's message i is msgs[i], the message at msgs[i].index of the request.
func inferFields(msgs []textMessage) func(string) string {
	return func(loomField string) string {
		m, field, ok := keptMessage(messageField, loomField, msgs)
		if !ok {
			return ""
		}
		return fmt.Sprintf("messages[%d].%s", m.index, field)
	}
}

// keptMessage reads a Loom field of the form list[i].field (pattern's two groups) as
// the kept message i and its field; ok is false for another field or an i past msgs.
func keptMessage(pattern *regexp.Regexp, loomField string, msgs []textMessage) (m textMessage, field string, ok bool) {
	g := pattern.FindStringSubmatch(loomField)
	if g == nil {
		return textMessage{}, "", false
	}
	i, err := strconv.Atoi(g[1])
	if err != nil || i >= len(msgs) {
		return textMessage{}, "", false
	}
	return msgs[i], g[2], true
}
