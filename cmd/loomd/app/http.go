package app

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"

	"github.com/loomplane/loom/adapters/mcp"
	"github.com/loomplane/loom/adapters/mem0"
	"github.com/loomplane/loom/console"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/httperr"
)

// newHTTP mounts the process's routes. A compressed body is decoded first, within the
// body limit, for every route (the adapters' too). Health and metrics come first and end their
// chain, so the migration gate never holds them back: every process answers them,
// whatever its roles. The operator routes authenticate on their own; the memory
// routes of both sides share one /v1 group and one authentication.
func (p *Process) newHTTP() (*fiber.App, error) {
	app := fiber.New(httpConfig(p.Cfg.HTTP, p.Log))
	if p.Cfg.Tracing.On() {
		app.Use(traceRequests(p.tracer()))
	}
	app.Use(httperr.DecodeContent(p.Cfg.HTTP.BodyLimitBytes))
	p.registerHealth(app)
	p.registerAdmin(app)
	data := app.Group("", p.refuseUntilMigrated)
	serves := p.Cfg.Roles.Has(config.RoleCommand) || p.Cfg.Roles.Has(config.RoleQuery)
	if serves {
		data.Use("/v1", p.Tokens.Middleware())
	}
	if p.Cfg.Roles.Has(config.RoleCommand) {
		p.Command.Register(data)
		p.Knowledge.Register(data)
	}
	if p.Query != nil {
		p.Query.Register(data)
		p.KnowledgeQuery.Register(data)
	}
	if serves {
		if err := p.registerAdapters(app); err != nil {
			return nil, err
		}
		app.Use(console.Prefix, console.Handler()) // static pages that call the routes above with the user's token
	}
	app.Use(func(c *fiber.Ctx) error { return fiber.ErrNotFound })
	httperr.AllowKnownMethods(app, p.Log)
	return app, nil
}

// registerAdapters mounts the agent-facing facades, which call Loom through a client
// (adapterClient: this process's own API in process, or LOOM_ADAPTER_UPSTREAM_URL) with
// the caller's token. /mcp checks the token at the door, since initialize and
// tools/list call no REST route; /mem0 takes mem0's "Token <key>" header and forwards
// it, so it sits behind no Bearer check of its own.
func (p *Process) registerAdapters(app *fiber.App) error {
	loom, err := p.adapterClient()
	if err != nil {
		return err
	}
	a := p.Cfg.Adapters
	app.Use("/mcp", p.Tokens.Middleware(), adaptor.HTTPHandler(mcp.NewHTTPHandler(mcp.HTTPOptions{
		Implementation: mcp.Implementation{Name: "loomd", Version: Version}, Loom: loom})))
	app.Use("/mem0", adaptor.HTTPHandler(http.StripPrefix("/mem0", mem0.NewHandler(mem0.Options{
		Loom: loom, Namespace: a.Mem0Namespace, Infer: a.Mem0Infer}))))
	return nil
}

// refuseUntilMigrated answers 503 MIGRATIONS_PENDING on every data route while a
// migration this build needs is not applied.
func (p *Process) refuseUntilMigrated(c *fiber.Ctx) error {
	if pending := p.migrations.Pending(c.UserContext(), time.Second); len(pending) > 0 {
		return (&httperr.Error{Status: http.StatusServiceUnavailable, Code: httperr.CodeMigrationsPending,
			Message:   "this process waits for migrations it may not apply (LOOM_BOOT_MIGRATE=0); retry",
			Retryable: true, RetryAfter: 5 * time.Second}).With("pending_migrations", pending)
	}
	return c.Next()
}

// httpConfig is the server's fiber configuration. Immutable: a route's parameters,
// query values, headers and body are copies, not views of the request's buffer, which
// fasthttp hands to the next request. Loom keeps a namespace past its request (the
// policy, judging, calibration and content-key caches key on it, and a search's
// calibration write names it later), and a view kept there changes under the cache's
// map when the buffer is reused: a key that no lookup finds again, or one that names
// another namespace.
func httpConfig(cfg config.HTTP, log *slog.Logger) fiber.Config {
	return fiber.Config{
		AppName:               "loomd",
		DisableStartupMessage: true,
		Immutable:             true,
		ErrorHandler:          httperr.Handler(log),
		BodyLimit:             cfg.BodyLimitBytes,
		ReadTimeout:           30 * time.Second,
		WriteTimeout:          30 * time.Second,
		IdleTimeout:           2 * time.Minute,
	}
}
