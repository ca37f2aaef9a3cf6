package workers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/loomplane/loom/command"
	"github.com/loomplane/loom/events"
	"github.com/loomplane/loom/internal/heads"
	"github.com/loomplane/loom/internal/llm"
	"github.com/loomplane/loom/internal/memrow"
)

// This file owns loom.entity_aliases: its reads and writes are here (readAliases,
// recordAliases), beside the extractor that resolves names through it; command's
// erasure and redaction delete its rows (command/entity_aliases_store.go). The
// journal's reads go through command's worker API (AmendedRevision).
//
// The entity extractor (memory-architecture, "Background passes", entity_extractor):
// its consumer group queues every value write that names no entity and states no
// relation; a pass asks the model for the row's entities and relations and writes
// them as an amendment of the row's metadata (memory.extract_entities), through the
// commit over the version it read, so the graph plane folds them as it folds declared
// ones and a redaction or an erasure of the row reaches them as it reaches the row.
// The amendment takes a seq and keeps the row's version (pending.amends): the version
// the writer was answered stays the head's, for its reads and its preconditions.
// Names resolve through the namespace's aliases (loom.entity_aliases): "NYC" and "New
// York City" are one entity. The aliases are read and written in the commit's
// transaction, under the namespace's generation lock, and a namespace's rows are
// extracted in seq order, so resolution follows the topic's order; a replay of the
// group extracts nothing again (its items are done), and a replay of the projection
// reads the resolved names off the topic.

const opExtractEntities = "memory.extract_entities"

// entityValueChars is how much of a value the extraction prompt shows.
const entityValueChars = 4000

// RunEntityExtractor runs the entity extractor's passes until ctx ends.
func (s *Service) RunEntityExtractor(ctx context.Context) {
	cfg := s.cfg.Entities
	s.runPasses(ctx, workerEntities, cfg.Interval, cfg.MaxAge+24*time.Hour, s.extractPass)
}

// entityAnswer is the model's answer.
type entityAnswer struct {
	Entities []struct {
		Name    string   `json:"name"`
		Type    string   `json:"type"`
		Aliases []string `json:"aliases"`
	} `json:"entities"`
	Relations []struct {
		Subject   string `json:"subject"`
		Predicate string `json:"predicate"`
		Object    string `json:"object"`
	} `json:"relations"`
}

var entitySchema = llm.MustSchema("entity_extraction", "The entities a memory names and the facts it states about them.", map[string]any{
	"type": "object", "additionalProperties": false, "required": []string{"entities", "relations"},
	"properties": map[string]any{
		"entities": map[string]any{"type": "array", "items": map[string]any{
			"type": "object", "additionalProperties": false, "required": []string{"name", "type", "aliases"},
			"properties": map[string]any{
				"name":    map[string]any{"type": "string", "description": "the entity's full name"},
				"type":    map[string]any{"type": "string", "description": "person, place, organization, product, project, concept, ..."},
				"aliases": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "other names the text or common usage gives it"},
			},
		}},
		"relations": map[string]any{"type": "array", "items": map[string]any{
			"type": "object", "additionalProperties": false, "required": []string{"subject", "predicate", "object"},
			"properties": map[string]any{
				"subject":   map[string]any{"type": "string"},
				"predicate": map[string]any{"type": "string", "description": "a short verb phrase: lives_in, works_for"},
				"object":    map[string]any{"type": "string"},
			},
		}},
	},
})

const entityRubric = `Extract the named entities a stored memory mentions (people, places, organizations, products, projects) and the facts it states between them.
Give each entity its full name, a type, and the other names it goes by (abbreviations, short forms). Only facts the text states; no guesses. An empty list when there are none.`

func entityPrompt(r *memrow.Row) []llm.Message {
	return []llm.Message{{Role: llm.RoleSystem, Content: entityRubric},
		{Role: llm.RoleUser, Content: fmt.Sprintf("Memory (key %q):\n%s", r.MemoryKey, cut(memrow.ValueText(r.Value), entityValueChars))}}
}

// extractPass extracts one batch, its namespaces a few at a time, each namespace's
// rows in seq order. A namespace whose row must wait leaves the rest of its rows for
// a later pass, so their order holds.
func (s *Service) extractPass(ctx context.Context) passResult {
	cfg := s.cfg.Entities
	items, res, ok := s.claimPass(ctx, workerEntities, cfg.Batch, cfg.MaxAge, false)
	if !ok {
		return res
	}
	byNS := map[[2]string][]workItem{}
	var order [][2]string
	for _, it := range items {
		k := [2]string{it.org, it.namespace}
		if byNS[k] == nil {
			order = append(order, k)
		}
		byNS[k] = append(byNS[k], it)
	}
	var mu sync.Mutex
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	for _, k := range order {
		ns := byNS[k]
		sort.Slice(ns, func(i, j int) bool { return ns[i].seq < ns[j].seq })
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			for i, it := range ns {
				mu.Lock()
				stopped := res.stopped
				mu.Unlock()
				if stopped || ctx.Err() != nil {
					s.giveBack(it, 0, false)
					continue
				}
				out := s.extractItem(ctx, it)
				mu.Lock()
				switch out {
				case judgeDone:
					res.done++
				case judgeStopped:
					res.stopped, res.errors = true, res.errors+1
				case judgeDeferred, judgeTransient, judgeRetry:
					res.errors++
				}
				mu.Unlock()
				if out != judgeDone {
					for _, rest := range ns[i+1:] {
						s.giveBack(rest, time.Second, false)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	return res
}

// extractItem extracts one row.
func (s *Service) extractItem(ctx context.Context, it workItem) judgeOutcome {
	soon := s.soon(it.worker)
	later := func(delay time.Duration, err error) judgeOutcome {
		if err != nil && ctx.Err() == nil {
			s.log.Warn("entity extractor: a row stays owed", "org", it.org, "namespace", it.namespace, "memory_id", it.memoryID, "err", err)
		}
		s.giveBack(it, delay, false)
		return judgeDeferred
	}
	head, err := s.headOfID(ctx, it.org, it.namespace, it.memoryID)
	if err != nil {
		return later(soon, err)
	}
	if !needsEntities(head, it.sha, s.now()) {
		return s.stamp(ctx, it, outcomeSkipped, nil)
	}
	pol, err := s.cmd.NamespacePolicy(ctx, it.org, it.namespace)
	if err != nil {
		return later(soon, err)
	}
	bill := llm.Bill{Org: it.org, Namespace: it.namespace, Purpose: llm.PurposeEntityExtraction}
	var ex entityAnswer
	o := s.models.Step(ctx, bill, s.outage, func(ctx context.Context) error {
		_, err := s.models.CompleteJSON(ctx, llm.Request{Bill: bill, Messages: entityPrompt(head), Schema: entitySchema, MaxTokens: 1200}, &ex)
		return err
	})
	switch o.Class {
	case 0:
		if o.Err != nil {
			return later(soon, o.Err)
		}
	case llm.ClassStopped:
		s.giveBack(it, 0, false)
		return judgeStopped
	case llm.ClassRefused:
		return s.stamp(ctx, it, outcomeErrored, map[string]string{"reason": "refused"})
	case llm.ClassMalformed:
		if it.attempts < 2 {
			s.giveBack(it, soon, true)
			return judgeRetry
		}
		return s.stamp(ctx, it, outcomeErrored, map[string]string{"reason": "nothing usable in three answers"})
	default:
		// Capped before the call: until the cap resets.
		return later(cmp.Or(o.After, soon), o.Err)
	}
	found := cleanExtraction(ex, s.cfg.Entities.MaxEntities)
	if len(found.entities) == 0 {
		return s.stamp(ctx, it, outcomeEmpty, nil)
	}
	written, err := s.writeEntities(ctx, head, found, pol)
	switch {
	case errors.Is(err, errOrgErasing):
		return later(soon, nil)
	case errors.Is(err, errNotActable):
		return s.stamp(ctx, it, outcomeSkipped, nil)
	case err != nil:
		return later(soon, err)
	}
	return s.stamp(ctx, it, outcomeExtracted, map[string]int{"entities": written})
}

// needsEntities reports whether a head still wants the extractor: live, served,
// holding the value queued, and still naming no entity and stating no relation.
func needsEntities(h *memrow.Row, sha string, now time.Time) bool {
	return h != nil && h.Served(now) && !h.Locked && h.ContentSHA256 == sha && len(h.Entities) == 0 && len(h.Relations) == 0
}

// extracted is an answer made to fit the row: valid names, within the limits.
type extracted struct {
	entities  []extractedEntity
	relations []memrow.RelationInput
}

type extractedEntity struct {
	name, typ string
	spellings []string // the name first, then its aliases; canonical forms, once each
}

// cleanExtraction keeps the answer's valid entities (a name within the graph's
// limits, once per canonical name) and the relations between names it gave, up to
// the limits a writer has.
func cleanExtraction(ex entityAnswer, maxEntities int) extracted {
	var out extracted
	known := map[string]bool{}
	limit := min(maxEntities, memrow.MaxEntities)
	for _, e := range ex.Entities {
		name := strings.TrimSpace(e.Name)
		canon := memrow.EntityName(name)
		if canon == "" || len(name) > memrow.MaxEntityNameBytes || known[canon] || len(out.entities) >= limit {
			continue
		}
		known[canon] = true
		typ := strings.TrimSpace(e.Type)
		if len(typ) > memrow.MaxEntityTypeBytes {
			typ = ""
		}
		ent := extractedEntity{name: name, typ: typ, spellings: []string{canon}}
		for _, a := range e.Aliases {
			if c := memrow.EntityName(a); c != "" && len(a) <= memrow.MaxEntityNameBytes && !containsString(ent.spellings, c) {
				ent.spellings = append(ent.spellings, c)
			}
		}
		out.entities = append(out.entities, ent)
	}
	for _, r := range ex.Relations {
		rel := memrow.RelationInput{Subject: strings.TrimSpace(r.Subject), Predicate: strings.TrimSpace(r.Predicate), Object: strings.TrimSpace(r.Object)}
		if len(out.relations) >= memrow.MaxRelations || memrow.ValidateRelations(append(append([]memrow.RelationInput(nil), out.relations...), rel)) != nil {
			continue
		}
		out.relations = append(out.relations, rel)
	}
	return out
}

// writeEntities commits the row's entities and relations as a revision of its
// metadata over the head it reads, resolving every name through the namespace's
// aliases in the commit's transaction. A head that moved is read again; one that no
// longer wants entities ends it (errNotActable). It returns the entities written.
func (s *Service) writeEntities(ctx context.Context, head *memrow.Row, found extracted, pol command.Policy) (int, error) {
	for try := 0; try < 3; try++ {
		h, err := heads.Read(ctx, s.pool, head.Identity)
		if err != nil {
			return 0, fmt.Errorf("read the head: %w", err)
		}
		if !needsEntities(h, head.ContentSHA256, s.now()) || h.MemoryID != head.MemoryID {
			return 0, errNotActable
		}
		prev, event, err := amendedRevision(ctx, s.pool, h.Identity, h.Version)
		if err != nil {
			return 0, err
		}
		row := command.CopyOf(h)
		row.JudgementOwed = false
		row.Actor = "worker:entity-extractor"
		guard := refuseUnderErasure(h.Org)
		err = s.cmd.CommitWorkerPlan(ctx, command.WorkerPlan{Org: h.Org, Namespace: h.Namespace,
			RequestID: fmt.Sprintf("entity_extractor:%s/%d", h.MemoryID, h.Version),
			Rows: []command.WorkerRow{{Op: opExtractEntities, Event: event, Row: row, ReadVersion: h.Version, ReadSeq: h.Seq,
				Amends: true, PrevVersion: prev}},
			InTx: func(ctx context.Context, tx pgx.Tx) error {
				if err := guard(ctx, tx); err != nil {
					return err
				}
				return resolveInto(ctx, tx, row, found, pol.Cardinality)
			}})
		if errors.Is(err, command.ErrHeadMoved) {
			continue
		}
		if err != nil {
			return 0, err
		}
		return len(row.Entities), nil
	}
	return 0, errNotActable
}

// amendedRevision reads what the amendment of a key's version repeats of its revision:
// the version before it (its prev_version) and its event type.
func amendedRevision(ctx context.Context, pool *pgxpool.Pool, id memrow.Identity, version int64) (int64, events.Type, error) {
	prev, event, err := command.AmendedRevision(ctx, pool, id, version)
	if err != nil {
		return 0, "", fmt.Errorf("read the revision of version %d: %w", version, err)
	}
	return prev, event, nil
}

// resolveInto resolves the extraction's names through the namespace's aliases and
// sets them on row: each entity takes the name the namespace's earliest row gave any
// of its spellings, else its own, and each spelling not yet known is recorded for
// it. Relations name their ends by the same resolution.
func resolveInto(ctx context.Context, tx pgx.Tx, row *memrow.Row, found extracted, cardinality func(string) string) error {
	var all []string
	for _, e := range found.entities {
		all = append(all, e.spellings...)
	}
	for _, r := range found.relations {
		all = append(all, memrow.EntityName(r.Subject), memrow.EntityName(r.Object))
	}
	known, err := readAliases(ctx, tx, row.Org, row.Namespace, all)
	if err != nil {
		return err
	}
	resolved := map[string]string{} // spelling → entity name
	var names []string
	types := map[string]string{}
	var newAliases []aliasRow
	seen := map[string]bool{}
	for _, e := range found.entities {
		name := e.name
		if k, ok := earliest(known, e.spellings); ok {
			name = k.entity
		}
		for _, sp := range e.spellings {
			if _, ok := known[sp]; !ok {
				known[sp] = aliasRow{alias: sp, entity: name, seq: row.Seq}
				newAliases = append(newAliases, known[sp])
			}
			resolved[sp] = name
		}
		canon := memrow.EntityName(name)
		if seen[canon] {
			continue
		}
		seen[canon] = true
		names = append(names, name)
		if e.typ != "" {
			types[name] = e.typ
		}
	}
	name := func(s string) string {
		c := memrow.EntityName(s)
		if n, ok := resolved[c]; ok {
			return n
		}
		if k, ok := known[c]; ok {
			return k.entity
		}
		return s
	}
	var rels []memrow.RelationInput
	for _, r := range found.relations {
		r.Subject, r.Object = name(r.Subject), name(r.Object)
		if memrow.ValidateRelations(append(append([]memrow.RelationInput(nil), rels...), r)) == nil {
			rels = append(rels, r)
		}
	}
	row.Entities, row.EntityTypes = names, nil
	if len(types) > 0 {
		row.EntityTypes = types
	}
	if len(rels) > 0 {
		row.Relations = memrow.Relations(rels, cardinality)
	}
	return recordAliases(ctx, tx, row, newAliases)
}

// aliasRow is one spelling of an entity in a namespace.
type aliasRow struct {
	alias, entity string
	seq           int64
}

// earliest is the known alias among spellings that the namespace's earliest row gave.
func earliest(known map[string]aliasRow, spellings []string) (aliasRow, bool) {
	var best aliasRow
	found := false
	for _, sp := range spellings {
		if k, ok := known[sp]; ok && (!found || k.seq < best.seq || (k.seq == best.seq && k.alias < best.alias)) {
			best, found = k, true
		}
	}
	return best, found
}

// loom.entity_aliases is the entity extractor's: these are its statements; the write
// side's erasure and redaction delete from it (command/entity_aliases_store.go).

func readAliases(ctx context.Context, tx pgx.Tx, org, ns string, spellings []string) (map[string]aliasRow, error) {
	out := map[string]aliasRow{}
	if len(spellings) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, `SELECT alias, entity, seq FROM loom.entity_aliases WHERE org = $1 AND namespace = $2 AND alias = ANY($3)`,
		org, ns, spellings)
	if err != nil {
		return nil, fmt.Errorf("read the entity aliases: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a aliasRow
		if err := rows.Scan(&a.alias, &a.entity, &a.seq); err != nil {
			return nil, fmt.Errorf("read the entity aliases: %w", err)
		}
		out[a.alias] = a
	}
	return out, rows.Err()
}

func recordAliases(ctx context.Context, tx pgx.Tx, row *memrow.Row, as []aliasRow) error {
	if len(as) == 0 {
		return nil
	}
	aliases, entities := make([]string, len(as)), make([]string, len(as))
	for i, a := range as {
		aliases[i], entities[i] = a.alias, a.entity
	}
	// The first row to state a spelling decides it: a later one leaves it.
	_, err := tx.Exec(ctx, `INSERT INTO loom.entity_aliases (org, namespace, alias, entity, user_id, memory_id, seq)
		SELECT $1, $2, a, e, loom.named_user($1, $5), $6, $7 FROM unnest($3::text[], $4::text[]) AS x(a, e)
		ON CONFLICT (org, namespace, alias) DO NOTHING`,
		row.Org, row.Namespace, aliases, entities, row.UserID, row.MemoryID, row.Seq)
	if err != nil {
		return fmt.Errorf("record the entity aliases: %w", err)
	}
	return nil
}
