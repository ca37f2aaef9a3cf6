// Package console is Loom's web console: static pages, embedded in loomd and served at
// /console, that sign in with a Loom token and call the same REST routes any client
// calls. The assets carry no data and need no token; every view's data comes from the
// API, which checks the token on each call, so the console can show nothing the token
// could not read with curl.
package console

import (
	"embed"
	"io/fs"
	"net/http"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"
)

//go:embed static
var assets embed.FS

// Prefix is where loomd mounts the console.
const Prefix = "/console"

// contentSecurityPolicy lets the pages load only their own scripts and styles and call
// only their own origin: no CDN, no inline script, no framing, no form posted elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the console's assets, mounted with app.Use(Prefix, Handler()). A
// method other than GET or HEAD passes on to the routes after it (the last one answers
// 404).
func Handler() fiber.Handler {
	root, err := fs.Sub(assets, "static")
	if err != nil {
		panic("console: the embedded assets have no static directory: " + err.Error()) // a build without them is broken
	}
	files := filesystem.New(filesystem.Config{Root: http.FS(root), Index: "index.html"})
	return func(c *fiber.Ctx) error {
		if c.Method() != fiber.MethodGet && c.Method() != fiber.MethodHead {
			return c.Next()
		}
		if c.Path() == Prefix {
			// The pages name their assets relative to the directory.
			return c.Redirect(Prefix+"/", http.StatusMovedPermanently)
		}
		c.Set(fiber.HeaderContentSecurityPolicy, contentSecurityPolicy)
		c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
		c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
		c.Set(fiber.HeaderXFrameOptions, "DENY")
		// A new loomd may ship new assets: the browser asks again each time (a 304 when unchanged).
		c.Set(fiber.HeaderCacheControl, "no-cache")
		return files(c)
	}
}
