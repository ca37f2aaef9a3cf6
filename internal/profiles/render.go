package profiles

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Formats profile.render answers in.
const (
	FormatMarkdown = "markdown"
	FormatText     = "text"
)

// Render writes a profile's value as prompt text: a heading, then one line per field
// that holds something (nulls and empty lists are left out), nested objects indented
// under their field. Fields come in name order, so the same profile renders the same.
func Render(userID string, value json.RawMessage, format string) (string, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("read the profile: %w", err)
	}
	var b strings.Builder
	if format == FormatMarkdown {
		fmt.Fprintf(&b, "## Profile of %s\n", userID)
	} else {
		fmt.Fprintf(&b, "Profile of %s:\n", userID)
	}
	renderValue(&b, v, 0, format)
	return strings.TrimRight(b.String(), "\n") + "\n", nil
}

func renderValue(b *strings.Builder, v any, depth int, format string) {
	obj, ok := v.(map[string]any)
	if !ok {
		fmt.Fprintf(b, "%s%s\n", bullet(depth, format), scalar(v))
		return
	}
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		field := obj[k]
		if empty(field) {
			continue
		}
		label := strings.ReplaceAll(k, "_", " ")
		if format == FormatMarkdown {
			label = "**" + label + "**"
		}
		switch x := field.(type) {
		case map[string]any:
			fmt.Fprintf(b, "%s%s:\n", bullet(depth, format), label)
			renderValue(b, x, depth+1, format)
		case []any:
			parts := make([]string, 0, len(x))
			for _, e := range x {
				if !empty(e) {
					parts = append(parts, scalar(e))
				}
			}
			fmt.Fprintf(b, "%s%s: %s\n", bullet(depth, format), label, strings.Join(parts, "; "))
		default:
			fmt.Fprintf(b, "%s%s: %s\n", bullet(depth, format), label, scalar(x))
		}
	}
}

func bullet(depth int, format string) string {
	if format == FormatMarkdown {
		return strings.Repeat("  ", depth) + "- "
	}
	return strings.Repeat("  ", depth+1)
}

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return strings.TrimSpace(x) == ""
	case []any:
		for _, e := range x {
			if !empty(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range x {
			if !empty(e) {
				return false
			}
		}
		return true
	}
	return false
}

func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		if x {
			return "yes"
		}
		return "no"
	}
	b, _ := json.Marshal(v)
	return string(b)
}
