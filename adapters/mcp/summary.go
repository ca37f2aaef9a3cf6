package mcp

import (
	"fmt"
	"strings"

	"github.com/loomplane/loom/client"
)

// The short texts beside each answer: what a model reads first.

func setSummary(ns string, a *client.SetAnswer) string {
	where := fmt.Sprintf("%s/%s", ns, a.MemoryKey)
	if a.Committed != nil {
		return fmt.Sprintf("%s: an earlier call with this idempotency_key committed version %s; nothing written again.", where, a.Committed.VersionText)
	}
	switch {
	case a.DryRun:
		return fmt.Sprintf("%s: dry run, nothing written; the write would be verdict %s, status %s.", where, a.Verdict, a.Status)
	case !a.Written && a.MergedInto != nil:
		return fmt.Sprintf("%s: nothing written, verdict merge: memory %q (key %s) already holds this value.", where, a.MergedInto.MemoryID, a.MergedInto.MemoryKey)
	case !a.Written:
		return fmt.Sprintf("%s: nothing written, verdict %s.", where, a.Verdict)
	}
	s := fmt.Sprintf("%s: written (%s), version %s, verdict %s, status %s", where, a.Event, a.VersionText, a.Verdict, a.Status)
	switch a.Verdict {
	case "restatement":
		s += fmt.Sprintf(", reinforced %d times", a.ReinforcementCount)
	case "duplicate":
		s += fmt.Sprintf(", duplicate of %s", a.DuplicateOf)
	case "conflict":
		s += fmt.Sprintf(", conflicts with %s", strings.Join(a.ConflictWith, ", "))
	}
	if len(a.Superseded) > 0 {
		s += fmt.Sprintf("; retired %s", strings.Join(a.Superseded, ", "))
	}
	for _, adv := range a.Advisories {
		s += "; " + adv
	}
	return s + "."
}

func searchSummary(a *client.SearchAnswer) string {
	switch a.Verdict {
	case client.VerdictNoMatch:
		return "verdict no_match: no memory matches. Abstain: say you do not know."
	case client.VerdictBelowThreshold:
		return fmt.Sprintf("verdict below_threshold: %d hits, none relevant enough (best relevance %.2f). Abstain: say you do not know.",
			len(a.Hits), a.Hits[0].Scores.Relevance)
	case client.VerdictLowConfidence:
		return fmt.Sprintf("verdict low_calibrated_confidence: %d hits, the best no better than the near misses any query finds. "+
			"Abstain: say you do not know.", len(a.Hits))
	case client.VerdictUngrounded:
		what := strings.Join(a.Grounding.Missing, ", ")
		if what == "" {
			what = "what the question asks about it"
		}
		return fmt.Sprintf("verdict ungrounded_identifier: no stored memory mentions %s. Abstain: say you do not know.", what)
	}
	if a.Abstain() {
		return fmt.Sprintf("verdict %s: abstain, say you do not know.", a.Verdict)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "verdict ok: %d hits, best first:", len(a.Hits))
	for i, h := range a.Hits {
		if i == 5 {
			fmt.Fprintf(&b, " … %d more", len(a.Hits)-i)
			break
		}
		fmt.Fprintf(&b, "\n- %s (score %.2f, relevance %.2f): %s", h.MemoryKey, h.Score, h.Scores.Relevance, clip(string(h.Value), 160))
	}
	if a.NextPageToken != "" {
		b.WriteString("\nMore of the ranking: page_token " + a.NextPageToken)
	}
	return b.String()
}

func askSummary(a *client.AskAnswer) string {
	if a.Abstained {
		return "abstained (" + a.AbstainCode + "): nothing stored answers this. Say you do not know."
	}
	keys := make([]string, len(a.Citations))
	for i, c := range a.Citations {
		keys[i] = c.MemoryKey
	}
	return fmt.Sprintf("%s\n(from %s)", a.Answer, strings.Join(keys, ", "))
}

func memorySummary(m *client.Memory) string {
	return fmt.Sprintf("%s/%s (agent %s, user %s, session %s): version %s, status %s: %s",
		m.Namespace, m.MemoryKey, m.Agent, m.UserID, m.SessionID, m.VersionText, m.Status, clip(string(m.Value), 400))
}

func listSummary(a *client.ListAnswer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d memories", len(a.Memories))
	for i, m := range a.Memories {
		if i == 10 {
			fmt.Fprintf(&b, "\n… %d more", len(a.Memories)-i)
			break
		}
		fmt.Fprintf(&b, "\n- %s: %s", m.MemoryKey, clip(string(m.Value), 120))
	}
	if a.NextPageToken != "" {
		b.WriteString("\nNext page: page_token " + a.NextPageToken)
	}
	return b.String()
}

func historySummary(a *client.HistoryAnswer) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d versions of %s/%s, oldest first:", len(a.Versions), a.Namespace, a.MemoryKey)
	for _, v := range a.Versions {
		fmt.Fprintf(&b, "\n- %s %s by %s: %s", v.UpdatedAt.Format("2006-01-02T15:04:05Z07:00"), v.Event, v.Actor, clip(string(v.Value), 120))
	}
	return b.String()
}

func deleteSummary(ns string, a *client.CopyAnswer) string {
	if a.VersionChanged {
		return fmt.Sprintf("%s/%s: nothing deleted: the key has moved on to version %s; read it again and decide.", ns, a.MemoryKey, a.VersionText)
	}
	return fmt.Sprintf("%s/%s: deleted (version %s); its history is kept.", ns, a.MemoryKey, a.VersionText)
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
