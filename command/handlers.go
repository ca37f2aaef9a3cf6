package command

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/loomplane/loom/command/extraction"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/idempotency"
	"github.com/loomplane/loom/internal/route"
)

// The write side's HTTP edge, and the only code of the package that sees fiber: each
// handler reads what its route, query and body name, in the order the checks are
// documented in schemas/openapi.yaml, and calls its operation with plain values (the
// layout docs/architecture.md describes: one operation per file, its handler here).

// measured runs a write under its Idempotency-Key and counts its outcome and latency.
// Every write runs within LOOM_PG_WRITE_DEADLINE_MS: a commit waiting for a synchronous
// standby that does not answer ends in a retryable 503 (outcome_unknown once its
// COMMIT was sent), never in a 200 for a commit the standby lacks.
func (s *Service) measured(c *fiber.Ctx, op string, run func(ctx context.Context, o origin) (any, error)) error {
	return s.measuredWithin(c, op, s.cfg.WriteDeadline, run)
}

// measuredWithin is measured for a write whose budget is its own: memory.set_from_messages
// waits for model calls before its write, which the write deadline still bounds.
func (s *Service) measuredWithin(c *fiber.Ctx, op string, deadline time.Duration, run func(ctx context.Context, o origin) (any, error)) error {
	start := s.now()
	ctx, cancel := context.WithTimeout(c.UserContext(), deadline)
	defer cancel()
	outcome := "ok"
	r, err := s.idempotent(ctx, idempotency.KeyOf(c, auth.From(c), op), func(hold *idempotency.Hold) (any, error) {
		ans, err := run(ctx, origin{requestID: c.Get("X-Request-Id"), hold: hold})
		if wa, ok := ans.(writeAnswer); ok && err == nil {
			outcome = wa.outcome()
		}
		return ans, envelope(err)
	})
	if err != nil {
		outcome = outcomeOf(err)
	}
	s.writes.With(op, outcome).Inc()
	s.latency.With(op).ObserveSince(start)
	switch {
	case err != nil:
		return err
	case r.Body == nil:
		return c.JSON(r.Answer)
	case r.Replay:
		c.Set("Idempotent-Replay", "true")
	}
	return c.Type("json").Send(r.Body)
}

// envelope maps the write side's typed errors to the error envelope; the others are
// envelopes already.
func envelope(err error) error {
	var ref *refusal
	if errors.As(err, &ref) {
		return ref.envelope()
	}
	return err
}

// send answers an operation that is not a write under an Idempotency-Key.
// onNamespace answers a route that runs op on the request's namespace once the token
// passes need (nil: any token with reach into the namespace).
func onNamespace[T any](c *fiber.Ctx, need func(auth.Principal) error, op func(context.Context, auth.Principal, string) (T, error)) error {
	p, ns, err := route.Namespace(c, need)
	if err != nil {
		return err
	}
	return send(c)(op(c.UserContext(), p, ns))
}

func send(c *fiber.Ctx) func(any, error) error {
	return func(ans any, err error) error {
		if err != nil {
			return envelope(err)
		}
		return c.JSON(ans)
	}
}

// mayWrite asks a token for a writer's role.
func mayWrite(p auth.Principal) error { return p.RequireWrite() }

// adminFor asks a token for an admin's role, naming what needs it.
func adminFor(what string) func(auth.Principal) error {
	return func(p auth.Principal) error { return requireAdminFor(p, what) }
}

// adminOfEveryUser asks a token for an admin's role over every user's rows: what it
// guards acts on the whole namespace, so a token bound to one user may not run it.
func adminOfEveryUser(what string) func(auth.Principal) error {
	return func(p auth.Principal) error {
		if err := requireAdminFor(p, what); err != nil {
			return err
		}
		return p.RequireEveryUser(what)
	}
}

// writeKey is a key route's prelude for a write: the principal, which reaches the
// route's namespace and may write, and the route's key.
func writeKey(c *fiber.Ctx) (auth.Principal, string, string, error) {
	p, ns, err := route.Namespace(c, mayWrite)
	if err != nil {
		return p, ns, "", err
	}
	key, err := route.Key(c)
	return p, ns, key, err
}

func (s *Service) handleSet(c *fiber.Ctx) error {
	return s.measured(c, "memory.set", keyWriteOf(c, s.set))
}

func (s *Service) handleUpdate(c *fiber.Ctx) error {
	return s.measured(c, "memory.update", keyWriteOf(c, s.update))
}

// keyWriteOf runs write over the key the route names, with memory.set's body.
func keyWriteOf(c *fiber.Ctx, write func(context.Context, auth.Principal, keyWrite) (*setAnswer, error)) func(context.Context, origin) (any, error) {
	return func(ctx context.Context, o origin) (any, error) {
		p, ns, key, err := writeKey(c)
		if err != nil {
			return nil, err
		}
		body, err := decodeSet(c.Body())
		if err != nil {
			return nil, err
		}
		return write(ctx, p, keyWrite{origin: o, namespace: ns, key: key, body: body})
	}
}

func (s *Service) handleUpdateByID(c *fiber.Ctx) error {
	return s.measured(c, "memory.update_by_id", func(ctx context.Context, o origin) (any, error) {
		p := auth.From(c)
		if err := p.RequireWrite(); err != nil {
			return nil, err
		}
		memoryID, err := uuid.Parse(c.Params("id"))
		if err != nil {
			return nil, httperr.NotFound("memory not found")
		}
		body, err := decodeSet(c.Body())
		if err != nil {
			return nil, err
		}
		return s.updateByID(ctx, p, idWrite{origin: o, memoryID: memoryID, body: body})
	})
}

func (s *Service) handleBulkSet(c *fiber.Ctx) error {
	return s.measured(c, "memory.bulk_set", func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		var body bulkRequest
		if err := httperr.DecodeBody(c.Body(), &body); err != nil {
			return nil, err
		}
		return s.bulkSet(ctx, p, bulkCall{origin: o, namespace: ns, body: body})
	})
}

func (s *Service) handleFromMessages(c *fiber.Ctx) error {
	return s.measuredWithin(c, "memory.set_from_messages", s.cfg.Extraction.Deadline, func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		var body extraction.Request
		if err := httperr.DecodeBody(c.Body(), &body); err != nil {
			return nil, err
		}
		return s.fromMessages(ctx, p, fromMessagesCall{origin: o, namespace: ns, body: &body})
	})
}

func (s *Service) handleImport(c *fiber.Ctx) error {
	return s.measured(c, "memory.import", func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		var body importRequest
		if err := httperr.DecodeBody(c.Body(), &body); err != nil {
			return nil, err
		}
		return s.importItems(ctx, p, importCall{origin: o, namespace: ns, body: body})
	})
}

func (s *Service) handleObserve(c *fiber.Ctx) error {
	return s.measured(c, "memory.observe", func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		var body observeRequest
		if err := httperr.DecodeBody(c.Body(), &body); err != nil {
			return nil, err
		}
		return s.observe(ctx, p, ns, body)
	})
}

func (s *Service) handleCrystallize(c *fiber.Ctx) error {
	return s.measuredWithin(c, "observe.crystallize", s.cfg.Extraction.Deadline, func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		var body crystallizeRequest
		if err := httperr.DecodeBody(c.Body(), &body); err != nil {
			return nil, err
		}
		return s.crystallize(ctx, p, ns, body, o)
	})
}

func (s *Service) handleRetryExtractions(c *fiber.Ctx) error {
	p := auth.From(c)
	if err := p.RequireWrite(); err != nil {
		return err
	}
	var body retryRequest
	if err := httperr.DecodeBody(c.Body(), &body); err != nil {
		return err
	}
	return send(c)(s.retryExtractions(c.UserContext(), p, body))
}

// keyHandler serves a custom method of a key route that is not a copy writer.
type keyHandler func(s *Service, c *fiber.Ctx, key string) error

// handleKeyMethod is POST /v1/namespaces/{ns}/memories/{key}:{method}.
func (s *Service) handleKeyMethod(c *fiber.Ctx) error {
	key, method, err := splitMethod(c.Params("key"))
	if err != nil {
		return err
	}
	if h, ok := keyHandlers[method]; ok {
		return h(s, c, key)
	}
	m, ok := keyMethods[method]
	if !ok {
		return httperr.NotFound("unknown method :" + method)
	}
	var body copyBody
	if len(c.Body()) > 0 {
		if err := httperr.DecodeBody(c.Body(), &body); err != nil {
			return err
		}
	}
	return s.measured(c, m.op, func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		return s.runCopy(ctx, p, copyCall{origin: o, namespace: ns, key: key, names: body.names(), version: -1, op: m})
	})
}

// handleDelete is memory.delete, or with ?version=V memory.delete_version.
func (s *Service) handleDelete(c *fiber.Ctx) error {
	key, err := route.Key(c)
	if err != nil {
		return err
	}
	names := route.Names{Agent: c.Query("agent"), UserID: c.Query("user_id"), SessionID: c.Query("session_id")}
	version := int64(-1)
	op := deleteOp
	if v := c.Query("version"); v != "" {
		if version, err = strconv.ParseInt(v, 10, 64); err != nil || version <= 0 {
			return httperr.Validation("version", "version must be the decimal version_text the caller read")
		}
		op.op = "memory.delete_version"
	}
	return s.measured(c, op.op, func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		return s.runCopy(ctx, p, copyCall{origin: o, namespace: ns, key: key, names: names, version: version, op: op})
	})
}

func (s *Service) handleRedact(c *fiber.Ctx, key string) error {
	var body redactBody
	if err := httperr.DecodeBody(c.Body(), &body); err != nil {
		return err
	}
	if body.Version == 0 {
		return httperr.Validation("version", "version is required")
	}
	return s.measured(c, "memory.redact", func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		return s.redact(ctx, p, redactCall{requestID: o.requestID, namespace: ns, key: key, names: body.names(), version: int64(body.Version)})
	})
}

func (s *Service) handleClear(c *fiber.Ctx) error {
	return s.measured(c, "memory.clear", func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		var scope clearRequest
		if len(c.Body()) > 0 {
			if err := httperr.DecodeBody(c.Body(), &scope); err != nil {
				return nil, err
			}
		}
		return s.clear(ctx, p, clearCall{origin: o, namespace: ns, scope: scope})
	})
}

func (s *Service) handleSweepExpired(c *fiber.Ctx) error {
	return onNamespace(c, adminFor("sweeping expired memories"), s.sweepNamespace)
}

func (s *Service) handleGetNamespace(c *fiber.Ctx) error {
	return onNamespace(c, nil, s.getNamespace)
}

func (s *Service) handlePutNamespace(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, adminOfEveryUser("changing a namespace's policy"))
	if err != nil {
		return err
	}
	var cfg NamespaceConfig
	if err := httperr.DecodeBody(c.Body(), &cfg); err != nil {
		return err
	}
	return send(c)(s.configure(c.UserContext(), p, ns, cfg))
}

func (s *Service) handleBlacklistAdd(c *fiber.Ctx) error {
	p, ns, req, err := blacklistCall(c)
	if err != nil {
		return err
	}
	return send(c)(s.addAndSweep(c.UserContext(), p, ns, req.Pattern))
}

func (s *Service) handleBlacklistRemove(c *fiber.Ctx) error {
	p, ns, req, err := blacklistCall(c)
	if err != nil {
		return err
	}
	return send(c)(s.changeBlacklist(c.UserContext(), p, ns, req.Pattern, removePattern))
}

// blacklistCall is a blacklist route's prelude: an admin of the namespace's every
// user (a pattern refuses and sweeps every user's rows), and the body.
func blacklistCall(c *fiber.Ctx) (auth.Principal, string, blacklistRequest, error) {
	var req blacklistRequest
	p, ns, err := route.Namespace(c, adminOfEveryUser("changing a namespace's blacklist"))
	if err == nil {
		err = httperr.DecodeBody(c.Body(), &req)
	}
	return p, ns, req, err
}

func (s *Service) handleAllowlistList(c *fiber.Ctx) error {
	return onNamespace(c, nil, s.listAllowlist)
}

func (s *Service) handleAllowlistAdd(c *fiber.Ctx) error {
	return s.allowlistCall(c, s.addAllowedPair)
}

func (s *Service) handleAllowlistRemove(c *fiber.Ctx) error {
	return s.allowlistCall(c, s.removeAllowedPair)
}

// allowlistCall runs a change of the conflict allowlist: a writer of the namespace,
// and the body.
func (s *Service) allowlistCall(c *fiber.Ctx, change func(context.Context, auth.Principal, string, allowlistRequest) (*allowlistAnswer, error)) error {
	p, ns, err := route.Namespace(c, mayWrite)
	if err != nil {
		return err
	}
	var req allowlistRequest
	if err := httperr.DecodeBody(c.Body(), &req); err != nil {
		return err
	}
	return send(c)(change(c.UserContext(), p, ns, req))
}

func (s *Service) handleBlacklistSweep(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, adminOfEveryUser("a blacklist sweep"))
	if err != nil {
		return err
	}
	var req sweepRequest
	if len(c.Body()) > 0 {
		if err := httperr.DecodeBody(c.Body(), &req); err != nil {
			return err
		}
	}
	return send(c)(s.sweep(c.UserContext(), p, ns, req))
}

func (s *Service) handleErasure(c *fiber.Ctx) error {
	p := auth.From(c)
	if err := requireAdminFor(p, "an erasure"); err != nil {
		return err
	}
	var req erasureRequest
	if err := httperr.DecodeBody(c.Body(), &req); err != nil {
		return err
	}
	view, err := s.requestErasure(c.UserContext(), p, req)
	if err != nil {
		return err
	}
	if view.Status == sagaRunning {
		c.Status(fiber.StatusAccepted)
	}
	return c.JSON(view)
}

func (s *Service) handleGetErasure(c *fiber.Ctx) error {
	p := auth.From(c)
	if err := requireAdminFor(p, "an erasure"); err != nil {
		return err
	}
	return send(c)(s.getErasure(c.UserContext(), p, c.Params("erasure_id")))
}

func (s *Service) handleDecide(c *fiber.Ctx, key string) error {
	var body decideBody
	if err := httperr.DecodeBody(c.Body(), &body); err != nil {
		return err
	}
	return s.measured(c, "memory.proposal_decide", func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		return s.decideProposal(ctx, p, decideCall{origin: o, namespace: ns, key: key, body: body})
	})
}

// bulkDeadline bounds a restore or a rollback run over HTTP: each commits a batch at a
// time, so one cut short leaves whole batches, and a retry goes on from them.
const bulkDeadline = time.Hour

func (s *Service) handleRestore(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, adminOfEveryUser("a namespace restore"))
	if err != nil {
		return err
	}
	// A gzip snapshot (Content-Encoding: gzip) was decoded, within the body limit, by
	// the server's httperr.DecodeContent before this handler: the body is plain here.
	body := c.Body()
	open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	ctx, cancel := context.WithTimeout(c.UserContext(), bulkDeadline)
	defer cancel()
	return send(c)(s.restore(ctx, p, restoreCall{requestID: c.Get("X-Request-Id"), namespace: ns, open: open}))
}

func (s *Service) handleRollback(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, adminOfEveryUser("a namespace rollback"))
	if err != nil {
		return err
	}
	var req rollbackRequest
	if err := httperr.DecodeBody(c.Body(), &req); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), bulkDeadline)
	defer cancel()
	return send(c)(s.rollback(ctx, p, ns, req, c.Get("X-Request-Id")))
}

// profile_schema.set (profile_schema.go).
func (s *Service) handleSetProfileSchema(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, adminOfEveryUser("setting a namespace's profile schema"))
	if err != nil {
		return err
	}
	var req ProfileSchemaRequest
	if err := httperr.DecodeBody(c.Body(), &req); err != nil {
		return err
	}
	return send(c)(s.setProfileSchema(c.UserContext(), p, ns, req))
}

// memory.consolidate and its undo (consolidate.go, consolidate_undo.go): an admin's.
func (s *Service) handleConsolidate(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, func(p auth.Principal) error { return requireAdminFor(p, "consolidating memories") })
	if err != nil {
		return err
	}
	var req ConsolidateRequest
	if err := httperr.DecodeBody(c.Body(), &req); err != nil {
		return err
	}
	return send(c)(s.consolidate(c.UserContext(), p, ns, req))
}

func (s *Service) handleConsolidationUndo(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, func(p auth.Principal) error { return requireAdminFor(p, "undoing a consolidation") })
	if err != nil {
		return err
	}
	runID, err := uuid.Parse(c.Params("run_id"))
	if err != nil {
		return httperr.NotFound("consolidation run not found")
	}
	return send(c)(s.undoConsolidation(c.UserContext(), p, ns, runID.String()))
}

// :promote (into the route's namespace) and :cross_promote (into the body's
// target_namespace); each op named where it is measured, so its Idempotency-Key is seen.
func (s *Service) handlePromote(c *fiber.Ctx, key string) error {
	body, err := promotionBody(c, opPromote)
	if err != nil {
		return err
	}
	return s.measured(c, "memory.promote", s.promotion(c, key, opPromote, body))
}

func (s *Service) handleCrossPromote(c *fiber.Ctx, key string) error {
	body, err := promotionBody(c, opCrossPromote)
	if err != nil {
		return err
	}
	return s.measured(c, "memory.cross_promote", s.promotion(c, key, opCrossPromote, body))
}

func promotionBody(c *fiber.Ctx, op string) (promoteBody, error) {
	var body promoteBody
	if len(c.Body()) > 0 {
		if err := httperr.DecodeBody(c.Body(), &body); err != nil {
			return body, err
		}
	}
	if op == opCrossPromote && body.TargetNamespace == "" {
		return body, httperr.Validation("target_namespace", "target_namespace is required: the namespace the memory is promoted into")
	}
	return body, nil
}

func (s *Service) promotion(c *fiber.Ctx, key, op string, body promoteBody) func(ctx context.Context, o origin) (any, error) {
	return func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		target := ns
		if op == opCrossPromote {
			target = body.TargetNamespace
		}
		return s.promote(ctx, p, promoteCall{origin: o, op: op, namespace: ns, key: key, names: body.names(), target: target})
	}
}

func (s *Service) handleDemote(c *fiber.Ctx, key string) error {
	return s.measured(c, "memory.demote", func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		return s.demote(ctx, p, demoteCall{origin: o, namespace: ns, key: key})
	})
}

func (s *Service) handleDecisionRecord(c *fiber.Ctx) error {
	return s.measured(c, "decision.record", func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		var body decisionRequest
		if err := httperr.DecodeBody(c.Body(), &body); err != nil {
			return nil, err
		}
		return s.recordDecision(ctx, p, decisionCall{origin: o, namespace: ns, body: body})
	})
}

// :copy and :move, each op named where it is measured.
func (s *Service) handleCopyMemory(c *fiber.Ctx, key string) error {
	body, err := moveBodyOf(c)
	if err != nil {
		return err
	}
	return s.measured(c, "memory.copy", s.relocation(c, key, body, false))
}

func (s *Service) handleMoveMemory(c *fiber.Ctx, key string) error {
	body, err := moveBodyOf(c)
	if err != nil {
		return err
	}
	return s.measured(c, "memory.move", s.relocation(c, key, body, true))
}

func moveBodyOf(c *fiber.Ctx) (moveBody, error) {
	var body moveBody
	if len(c.Body()) > 0 {
		if err := httperr.DecodeBody(c.Body(), &body); err != nil {
			return body, err
		}
	}
	return body, nil
}

func (s *Service) relocation(c *fiber.Ctx, key string, body moveBody, move bool) func(ctx context.Context, o origin) (any, error) {
	return func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		return s.copyMemory(ctx, p, moveCall{origin: o, namespace: ns, key: key, body: body, move: move})
	}
}

func (s *Service) handleDeleteNamespace(c *fiber.Ctx) error {
	return onNamespace(c, adminOfEveryUser("deleting a namespace"), s.deleteNamespace)
}

// idHandler handles one custom method of POST /v1/memories/{id}:{method}.
type idHandler func(s *Service, c *fiber.Ctx, memoryID uuid.UUID) error

// idMethods are the custom methods of POST /v1/memories/{id}:{method}.
var idMethods = map[string]idHandler{
	"verify": (*Service).handleVerifyByID,
	"redact": (*Service).handleRedactByID,
}

func (s *Service) handleIDMethod(c *fiber.Ctx) error {
	raw, method, err := splitMethod(c.Params("id"))
	if err != nil {
		return err
	}
	h, ok := idMethods[method]
	if !ok {
		return httperr.NotFound("unknown method :" + method)
	}
	memoryID, err := uuid.Parse(raw)
	if err != nil {
		return httperr.NotFound("memory not found")
	}
	return h(s, c, memoryID)
}

func (s *Service) handleVerifyByID(c *fiber.Ctx, memoryID uuid.UUID) error {
	return s.measured(c, "memory.verify", func(ctx context.Context, o origin) (any, error) {
		p := auth.From(c)
		if err := p.RequireWrite(); err != nil {
			return nil, err
		}
		head, err := s.headByID(ctx, p, memoryID)
		if err != nil {
			return nil, err
		}
		return s.runCopy(ctx, p, copyCall{origin: o, namespace: head.Namespace, key: head.MemoryKey, names: keyOf(head),
			version: -1, op: keyMethods["verify"]})
	})
}

func (s *Service) handleRedactByID(c *fiber.Ctx, memoryID uuid.UUID) error {
	var body redactBody
	if err := httperr.DecodeBody(c.Body(), &body); err != nil {
		return err
	}
	if body.Agent != "" || body.UserID != "" || body.SessionID != "" {
		return httperr.Validation("body", "a redact by id takes its identity from the id")
	}
	if body.Version == 0 {
		return httperr.Validation("version", "version is required")
	}
	return s.measured(c, "memory.redact", func(ctx context.Context, o origin) (any, error) {
		p := auth.From(c)
		if err := p.RequireWrite(); err != nil {
			return nil, err
		}
		head, err := s.headByID(ctx, p, memoryID)
		if err != nil {
			return nil, err
		}
		return s.redact(ctx, p, redactCall{requestID: o.requestID, namespace: head.Namespace, key: head.MemoryKey,
			names: keyOf(head), version: int64(body.Version)})
	})
}

func (s *Service) handleGetModelCalls(c *fiber.Ctx) error {
	return send(c)(s.modelCalls(c.UserContext(), auth.From(c)))
}

func (s *Service) handlePutModelCalls(c *fiber.Ctx) error {
	var body modelCallsRequest
	if err := httperr.DecodeBody(c.Body(), &body); err != nil {
		return err
	}
	return send(c)(s.setModelCalls(c.UserContext(), auth.From(c), body))
}

func (s *Service) handleTouch(c *fiber.Ctx, key string) error {
	var body copyBody
	if len(c.Body()) > 0 {
		if err := httperr.DecodeBody(c.Body(), &body); err != nil {
			return err
		}
	}
	return s.measured(c, opTouch, func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		return s.touch(ctx, p, ns, key, body.names())
	})
}

// handleAssignCategory is POST …/memories/{key}:assign_category.
func (s *Service) handleAssignCategory(c *fiber.Ctx, key string) error {
	var body assignCategoryBody
	if err := httperr.DecodeBody(c.Body(), &body); err != nil {
		return err
	}
	if err := checkCategories(&body); err != nil {
		return err
	}
	return s.measured(c, "memory.assign_category", func(ctx context.Context, o origin) (any, error) {
		p, ns, err := route.Namespace(c, mayWrite)
		if err != nil {
			return nil, err
		}
		return s.assignCategory(ctx, p, copyCall{origin: o, namespace: ns, key: key, names: body.names(), version: -1}, body)
	})
}

func (s *Service) handleTuneNamespace(c *fiber.Ctx) error {
	return onNamespace(c, nil, s.tuneNamespace)
}

func (s *Service) handleValidateNamespace(c *fiber.Ctx) error {
	return onNamespace(c, nil, s.validateNamespace)
}
