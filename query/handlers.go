package query

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/httperr"
	"github.com/loomplane/loom/internal/memrow"
	"github.com/loomplane/loom/internal/route"
)

// The read side's HTTP edge, and the only code of the package that sees fiber: each
// handler reads what its route, query and body name, in the order the checks are
// documented in schemas/openapi.yaml, and calls its operation with plain values (the
// layout docs/architecture.md describes: one operation per file, its handler here).

// send answers an operation's answer, or its error in the envelope.
func send(c *fiber.Ctx) func(any, error) error {
	return func(ans any, err error) error {
		if err != nil {
			return envelope(err)
		}
		return c.JSON(ans)
	}
}

// envelope maps the read side's typed errors to the error envelope; the others are
// envelopes already.
func envelope(err error) error {
	var behind *BehindError
	if errors.As(err, &behind) {
		return httperr.Unavailable(httperr.CodeProjectionBehind, behind.Error()+"; retry", nil).
			With("namespace", behind.Namespace).With("generation", behind.Generation).With("watermark", behind.Watermark)
	}
	return err
}

// pointRead bounds a read that answers from Postgres alone by LOOM_PG_READ_DEADLINE_MS:
// a Postgres that does not answer in time is a retryable 503, not a hung request.
func (s *Service) pointRead(c *fiber.Ctx) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.UserContext(), s.cfg.PointReadDeadline)
}

// barrierRead bounds a read that waits at the barrier: the barrier's own budget
// (LOOM_PG_PROJECTION_WAIT_MS, its capture included), then LOOM_CH_READ_DEADLINE_MS for
// the ClickHouse statements and the check of their rows against Postgres.
func (s *Service) barrierRead(c *fiber.Ctx) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.UserContext(), s.cfg.ProjectionWait+s.cfg.AfterBarrierDeadline)
}

// readKey is a key route's prelude for a read: the principal, which reaches the
// route's namespace, and the identity the route and the query string name. A token
// bound to one user reads that user's rows by default, and no other user's: another
// user's key is not found.
func readKey(c *fiber.Ctx) (auth.Principal, memrow.Identity, error) {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return p, memrow.Identity{}, err
	}
	key, err := route.Key(c)
	if err != nil {
		return p, memrow.Identity{}, err
	}
	id, other := route.Identity(p, ns, key, route.Names{Agent: c.Query("agent"), UserID: c.Query("user_id"), SessionID: c.Query("session_id")})
	if err := id.Validate(); err != nil {
		return p, id, err
	}
	if other { // a promoted row is every user's and every session's (route.Identity)
		return p, id, httperr.NotFound("memory not found")
	}
	return p, id, nil
}

func (s *Service) handleSearch(c *fiber.Ctx) error {
	start := s.now()
	var req searchRequest
	err := httperr.DecodeBody(c.Body(), &req)
	var bad *httperr.Error
	if errors.As(err, &bad) && bad.Field == "top_k" { // a fraction, or a number no integer holds
		err = s.topKRefused()
	}
	var ans *searchAnswer
	if err == nil {
		ctx, cancel := s.barrierRead(c)
		defer cancel()
		req.fromRoute = true
		ans, err = s.search(ctx, auth.From(c), c.Params("ns"), &req)
	}
	verdict := "error"
	if ans != nil {
		verdict = string(ans.Verdict)
	}
	s.searches.With(verdict).Inc()
	s.searchTime.ObserveSince(start)
	return send(c)(ans, err)
}

func (s *Service) handleRecall(c *fiber.Ctx) error {
	var req recallRequest
	if err := httperr.DecodeBody(c.Body(), &req); err != nil {
		return envelope(err)
	}
	return send(c)(s.recall(c.UserContext(), auth.From(c), c.Params("ns"), &req))
}

func (s *Service) handleSessionDigest(c *fiber.Ctx) error {
	ctx, cancel := s.pointRead(c)
	defer cancel()
	return send(c)(s.sessionDigest(ctx, auth.From(c), c.Params("ns"), c.Params("session_id")))
}

func (s *Service) handleLearnings(c *fiber.Ctx) error {
	ctx, cancel := s.pointRead(c)
	defer cancel()
	return send(c)(s.listLearnings(ctx, auth.From(c), learningsCall{namespace: c.Params("ns"), agent: c.Query("agent"), limit: c.Query("limit")}))
}

func (s *Service) handleSearchTrace(c *fiber.Ctx) error {
	return send(c)(s.searchTraceOf(c.UserContext(), auth.From(c), c.Params("trace_id")))
}

func (s *Service) handleGet(c *fiber.Ctx) error {
	p, id, err := readKey(c)
	if err != nil {
		return err
	}
	asOf := c.Query("as_of")
	bound := s.pointRead
	if asOf != "" {
		bound = s.barrierRead // an as_of read replays ClickHouse's history
	}
	ctx, cancel := bound(c)
	defer cancel()
	if err := s.refuseDeleted(ctx, p.Org, id.Namespace); err != nil {
		return err
	}
	return send(c)(s.get(ctx, p, id, asOf))
}

func (s *Service) handleGetByID(c *fiber.Ctx) error {
	memoryID, err := uuid.Parse(c.Params("id"))
	if err != nil {
		return httperr.NotFound("memory not found")
	}
	ctx, cancel := s.pointRead(c)
	defer cancel()
	return send(c)(s.getByID(ctx, auth.From(c), memoryID))
}

func (s *Service) handleHistory(c *fiber.Ctx) error {
	p, id, err := readKey(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.pointRead(c)
	defer cancel()
	if err := s.refuseDeleted(ctx, p.Org, id.Namespace); err != nil {
		return err
	}
	return send(c)(s.history(ctx, id))
}

// listQueryOf reads a list's query string.
func listQueryOf(c *fiber.Ctx) listQuery {
	return listQuery{agent: c.Query("agent"), userID: c.Query("user_id"), sessionID: c.Query("session_id"),
		memoryType: c.Query("memory_type"), tags: c.Query("tags"), tagsMode: c.Query("tags_mode"), status: c.Query("status"),
		includeSuperseded: c.Query("include_superseded"),
		includeTombstoned: c.Query("include_tombstoned"), asOf: c.Query("as_of"), limit: c.Query("limit"), pageToken: c.Query("page_token")}
}

func (s *Service) handleList(c *fiber.Ctx) error {
	ctx, cancel := s.barrierRead(c)
	defer cancel()
	if err := s.refuseDeleted(ctx, auth.From(c).Org, c.Params("ns")); err != nil {
		return err
	}
	return send(c)(s.list(ctx, auth.From(c), listCall{namespace: c.Params("ns"), order: c.Query("order", "newest"), q: listQueryOf(c)}))
}

func (s *Service) handleKeys(c *fiber.Ctx) error {
	ctx, cancel := s.barrierRead(c)
	defer cancel()
	if err := s.refuseDeleted(ctx, auth.From(c).Org, c.Params("ns")); err != nil {
		return err
	}
	return send(c)(s.keys(ctx, auth.From(c), listCall{namespace: c.Params("ns"), prefix: c.Query("prefix"), q: listQueryOf(c)}))
}

func (s *Service) handleNamespaces(c *fiber.Ctx) error {
	ctx, cancel := s.pointRead(c)
	defer cancel()
	return send(c)(s.listNamespaces(ctx, auth.From(c), namespaceList{limit: c.Query("limit"), pageToken: c.Query("page_token")}))
}

func (s *Service) handleNamespaceAudit(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	ctx, cancel := s.barrierRead(c)
	defer cancel()
	return send(c)(s.namespaceAudit(ctx, p, auditCall{namespace: ns, afterSeq: c.Query("after_seq"), limit: c.Query("limit")}))
}

func (s *Service) handleEntity(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	name, err := url.PathUnescape(c.Params("name"))
	if err != nil {
		return httperr.Validation("name", "the name is not valid percent-encoding")
	}
	ctx, cancel := s.barrierRead(c)
	defer cancel()
	return send(c)(s.entity(ctx, p, entityCall{namespace: ns, name: name, asOf: c.Query("as_of"),
		includeClosed: c.Query("include_closed"), edges: c.Query("edges")}))
}

// handleAsk is memory.ask. A client that asks for a stream (stream: true, or Accept:
// text/event-stream) gets server-sent events: "search" with the search's answer as
// soon as it is known, then "answer" (or "error", the envelope) and "done". What
// fails before the search answered (validation, the barrier, the provider's settings,
// the cap) is an ordinary error answer; one after it is the "error" event: the
// envelope, with the status it would have had.
func (s *Service) handleAsk(c *fiber.Ctx) error {
	var req askRequest
	if err := httperr.DecodeBody(c.Body(), &req); err != nil {
		return err
	}
	ctx, p, ns := c.UserContext(), auth.From(c), c.Params("ns")
	if !req.Stream && !strings.Contains(c.Get(fiber.HeaderAccept), "text/event-stream") {
		return send(c)(s.ask(ctx, p, ns, &req))
	}
	st, err := s.askSearch(ctx, p, ns, &req)
	if err != nil {
		return envelope(err)
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no")
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		emit := func(event string, v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
			w.Flush()
		}
		emit("search", st.search)
		ans, err := s.askModel(ctx, st)
		if err != nil {
			status, body := httperr.Envelope(envelope(err))
			body["status"] = status
			emit("error", body)
		} else {
			emit("answer", ans)
		}
		emit("done", map[string]any{})
	})
	return nil
}

func (s *Service) handleExtractionStatus(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	return send(c)(s.extractionStatus(c.UserContext(), p, ns, statusQuery{status: c.Query("status"), limit: c.Query("limit")}))
}

func (s *Service) handleMyExtractions(c *fiber.Ctx) error {
	return send(c)(s.extractionStatusMine(c.UserContext(), auth.From(c), c.Params("queue_id"),
		statusQuery{status: c.Query("status"), limit: c.Query("limit")}))
}

func (s *Service) handleBulkGet(c *fiber.Ctx) error {
	var req bulkGetRequest
	if err := httperr.DecodeBody(c.Body(), &req); err != nil {
		return err
	}
	if err := s.refuseDeleted(c.UserContext(), auth.From(c).Org, c.Params("ns")); err != nil {
		return err
	}
	return send(c)(s.bulkGet(c.UserContext(), auth.From(c), c.Params("ns"), req))
}

func (s *Service) handleSnapshot(c *fiber.Ctx) error {
	st, err := s.Snapshot(c.UserContext(), auth.From(c), c.Params("ns"))
	if err != nil {
		return envelope(err)
	}
	return s.sendStream(c, st, "namespace.snapshot")
}

func (s *Service) handleExport(c *fiber.Ctx) error {
	userID := c.Query("user_id")
	if userID == "" {
		return httperr.Validation("user_id", "user_id is required: the user whose memories to export")
	}
	st, err := s.Export(c.UserContext(), auth.From(c), userID)
	if err != nil {
		return envelope(err)
	}
	return s.sendStream(c, st, "erasure.export")
}

// sendStream answers st as the body, then ends it.
func (s *Service) sendStream(c *fiber.Ctx, st *Stream, what string) error {
	c.Set(fiber.HeaderContentType, "application/x-ndjson")
	c.Set("X-Loom-Stream-Id", st.ID())
	gz := acceptsGzip(c.Get(fiber.HeaderAcceptEncoding))
	if gz {
		c.Set(fiber.HeaderContentEncoding, "gzip")
	}
	c.Vary(fiber.HeaderAcceptEncoding)
	conn := c.Context().Conn()
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer st.Close()
		ctx, cancel := context.WithTimeout(context.Background(), snapshotDeadline)
		defer cancel()
		end, err := st.WriteOut(ctx, &deadlineWriter{w: w, conn: conn}, gz)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			s.log.Warn("a bulk read stopped before its end line", "what", what, "id", st.ID(), "err", err)
			return
		}
		s.log.Info("bulk read sent", "what", what, "id", st.ID(), "rows", end.Rows)
	})
	return nil
}

// profileRoute is the prelude of profile.structured and profile.render (profile.go,
// profile_render.go): the principal, the namespace and the
// route's user (a token bound to another user finds nothing).
func profileRoute(c *fiber.Ctx) (auth.Principal, string, string, error) {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return p, ns, "", err
	}
	userID, err := route.DecodeKey(c.Params("user_id"))
	if err != nil || userID == "" {
		return p, ns, "", httperr.Validation("user_id", "the user id is not valid percent-encoding")
	}
	if !p.ActsOn(userID) {
		return p, ns, "", httperr.NotFound("no profile of this user has been built")
	}
	return p, ns, userID, nil
}

func (s *Service) handleProfile(c *fiber.Ctx) error {
	p, ns, userID, err := profileRoute(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.pointRead(c)
	defer cancel()
	return send(c)(s.structuredProfile(ctx, p, ns, userID))
}

func (s *Service) handleProfileRender(c *fiber.Ctx) error {
	p, ns, userID, err := profileRoute(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.pointRead(c)
	defer cancel()
	return send(c)(s.profileRender(ctx, p, ns, userID, c.Query("format")))
}

// handleContextPack is context.pack; handleStack is memory.stack, its layers unrendered.
// A budget that is no integer (a fraction, or one no integer holds) is the budget's
// 422, as one out of range is.
func (s *Service) handleContextPack(c *fiber.Ctx) error {
	req, err := decodePack(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.barrierRead(c)
	defer cancel()
	return send(c)(s.contextPack(ctx, auth.From(c), c.Params("ns"), req))
}

func (s *Service) handleStack(c *fiber.Ctx) error {
	req, err := decodePack(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.barrierRead(c)
	defer cancel()
	return send(c)(s.memoryStack(ctx, auth.From(c), c.Params("ns"), req))
}

func decodePack(c *fiber.Ctx) (*packRequest, error) {
	var req packRequest
	err := httperr.DecodeBody(c.Body(), &req)
	var bad *httperr.Error
	if errors.As(err, &bad) && bad.Field == "budget_tokens" {
		return nil, budgetRefused()
	}
	return &req, err
}

func (s *Service) handleTimeline(c *fiber.Ctx) error {
	ctx, cancel := s.pointRead(c)
	defer cancel()
	return send(c)(s.timeline(ctx, auth.From(c), timelineCall{namespace: c.Params("ns"), key: c.Query("key"), entity: c.Query("entity"),
		agent: c.Query("agent"), userID: c.Query("user_id"), sessionID: c.Query("session_id"), limit: c.Query("limit")}))
}

func (s *Service) handleRelated(c *fiber.Ctx) error {
	p, id, err := readKey(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.barrierRead(c) // the vector neighbours are a search's
	defer cancel()
	return send(c)(s.related(ctx, p, id, c.Query("limit")))
}

func (s *Service) handleAggregate(c *fiber.Ctx) error {
	ctx, cancel := s.pointRead(c)
	defer cancel()
	return send(c)(s.aggregate(ctx, auth.From(c), aggregateCall{namespace: c.Params("ns"), by: c.Query("by"), agent: c.Query("agent"),
		userID: c.Query("user_id"), sessionID: c.Query("session_id"), limit: c.Query("limit")}))
}

func (s *Service) handleStatuses(c *fiber.Ctx) error {
	var req statusesRequest
	if err := httperr.DecodeBody(c.Body(), &req); err != nil {
		return err
	}
	ctx, cancel := s.pointRead(c)
	defer cancel()
	return send(c)(s.statuses(ctx, auth.From(c), c.Params("ns"), req))
}

func (s *Service) handleInventory(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	ctx, cancel := s.pointRead(c)
	defer cancel()
	return send(c)(s.inventory(ctx, p, ns))
}

// The categories read (categories.go).
func (s *Service) handleCategories(c *fiber.Ctx) error {
	p, ns, err := route.Namespace(c, nil)
	if err != nil {
		return err
	}
	ctx, cancel := s.pointRead(c)
	defer cancel()
	return send(c)(s.categories(ctx, p, ns))
}

func (s *Service) handleInspect(c *fiber.Ctx) error {
	p, id, err := readKey(c)
	if err != nil {
		return err
	}
	ctx, cancel := s.barrierRead(c)
	defer cancel()
	return send(c)(s.inspect(ctx, p, id))
}
