package console

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/tests/testenv"
)

// screenshotDir is where the test leaves a PNG of each view: LOOM_CONSOLE_SCREENSHOTS,
// else tests/console/screenshots (ignored by git; CI keeps it as an artifact).
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("LOOM_CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = "screenshots"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("screenshot folder: %v", err)
	}
	return dir
}

// browser is one headless Chromium tab on the console of a loomd.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string // loomd's URL
	shots string

	mu   sync.Mutex
	sent map[string]int // requests the page sent, by method
}

// newBrowser starts Debian's chromium (make deps-test installs it) headless, with a
// laptop-sized window, for the test's life. The deadline bounds a hung browser; no
// assertion reads the clock.
func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the console tests drive Debian's chromium, which is not installed: run `make deps-test` (%v)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.Headless,
		chromedp.NoSandbox, // the suite may run as root, where Chromium's sandbox refuses to start
		chromedp.DisableGPU, chromedp.WindowSize(1366, 860))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	// The first run starts the browser and ties it to the context it is given: the
	// tab's own, not a step's (whose deadline would close it).
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("browser: start chromium: %v", err)
	}
	b := &browser{t: t, ctx: bctx, base: base, shots: screenshotDir(t), sent: map[string]int{}}
	if err := chromedp.Listen(bctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			b.mu.Lock()
			b.sent[e.Request.Method]++
			b.mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("browser: listen to the tab's requests: %v", err)
	}
	b.do(chromedp.Navigate(base + "/console/"))
	return b
}

// stepDeadline bounds one browser step, so a step that never completes fails the test
// with the page it saw rather than hanging to the browser's 10-minute deadline.
const stepDeadline = time.Minute

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepDeadline)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.shot("failure")
		b.t.Fatalf("browser: %v\n%s", err, b.page())
	}
}

// page describes what the tab shows, for a failure: its address, the view drawn and
// the text of the page.
func (b *browser) page() string {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](`JSON.stringify({hash: location.hash, view: document.querySelector('main')?.dataset.view, ready: document.querySelector('main')?.dataset.ready, text: document.body.innerText.slice(0, 2000)})`))
	if err != nil {
		return "(the page could not be read: " + err.Error() + ")"
	}
	return string(raw)
}

// eval runs a script in the page and decodes its value into out.
func (b *browser) eval(script string, out any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepDeadline)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](script))
	if err != nil {
		b.t.Fatalf("browser: %s: %v", script, err)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		b.t.Fatalf("browser: %s answered %s: %v", script, raw, err)
	}
}

// open moves the single-page console to a view (a hash route), without a reload.
func (b *browser) open(hash string) {
	b.t.Helper()
	h, _ := json.Marshal(hash)
	b.do(chromedp.Evaluate[chromedp.Void]("location.hash = " + string(h)))
}

// wait waits until an element matching the CSS selector is visible.
func (b *browser) wait(sel string) {
	b.t.Helper()
	b.do(chromedp.WaitVisible(chromedp.CSS(sel)))
}

func (b *browser) shot(name string) {
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err == nil {
		err = os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644)
	}
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}

func (b *browser) signIn(token string) {
	b.t.Helper()
	if b.present("#signout") {
		b.do(chromedp.Click(chromedp.CSS("#signout")))
	}
	b.wait("#token")
	b.do(chromedp.SendKeys(chromedp.CSS("#token"), token+kb.Enter)) // the keyboard alone signs in
	b.wait("#who-role")
}

// requests is how many requests of a method the page has sent.
func (b *browser) requests(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sent[method]
}

func (b *browser) present(sel string) bool {
	b.t.Helper()
	var ok bool
	s, _ := json.Marshal(sel)
	b.eval("document.querySelector("+string(s)+") !== null", &ok)
	return ok
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	var s string
	q, _ := json.Marshal(sel)
	b.eval("document.querySelector("+string(q)+").textContent", &s)
	return s
}

// The console's tour, as a writer and a reader of one org: sign in, see the namespace
// and a memory written through the API listed, its history after a revision, pin, delete and restore
// it from its page, see a redaction marked, read a search's leg bars (the same scores
// the API answers), open the graph of a declared entity, and check that a reader has no
// write buttons and that another org's namespace shows nothing.
func TestConsoleInABrowser(t *testing.T) {
	n, url := env.API(t, nil)
	org, other := testenv.Unique(t, "org"), testenv.Unique(t, "other")
	ns, otherNS := testenv.Unique(t, "ns"), testenv.Unique(t, "private")
	admin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	reader := env.Token(t, n, auth.NewToken{Org: org, Role: auth.RoleReader, Namespaces: []string{ns}})
	outsider := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: other}))

	const secret = "the other org's launch code is 7421"
	if r := outsider.Put(t, otherNS, "launch", map[string]any{"value": secret}); r.Status != http.StatusOK {
		t.Fatalf("write in the other org: %d %s", r.Status, r.Body)
	}
	first := admin.Put(t, ns, "drink", map[string]any{"value": "Alice drinks green tea every morning", "user_id": "alice", "tags": []string{"preference"}})
	if first.Status != http.StatusOK {
		t.Fatalf("write: %d %s", first.Status, first.Body)
	}
	admin.Put(t, ns, "editor", map[string]any{"value": "Alice writes code in Emacs", "user_id": "alice"})

	b := newBrowser(t, url)
	b.wait("#token")
	b.shot("01-sign-in")
	b.signIn(admin.Token)
	if got := b.text("#who-org"); !strings.Contains(got, org) {
		t.Errorf("signed in as %q; want org %s", got, org)
	}

	checkListed(t, b, ns, otherNS)

	// A revision, then the memory's page: the history holds both versions.
	if r := admin.Put(t, ns, "drink", map[string]any{"value": "Alice drinks oolong tea every morning", "user_id": "alice"}); r.Status != http.StatusOK {
		t.Fatalf("revise: %d %s", r.Status, r.Body)
	}
	b.open("#/ns/" + ns + "/m/drink?user_id=alice")
	b.wait("#history li:nth-child(2)")
	var events []string
	b.eval(`[...document.querySelectorAll('#history li')].map(li => li.dataset.event)`, &events)
	if len(events) != 2 {
		t.Errorf("history shows %v; want the write and the revision", events)
	}
	if v := b.text("#value"); !strings.Contains(v, "oolong") {
		t.Errorf("the page shows the value %q; want the revision's", v)
	}
	b.shot("03-memory-history")

	checkMemoryActions(t, b, admin, ns)

	// A redaction of the first version: the timeline marks it and shows no value.
	redact, _ := json.Marshal(map[string]any{"version": first.JSON(t)["version_text"], "user_id": "alice"})
	if r := admin.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories/drink:redact", redact); r.Status != http.StatusOK {
		t.Fatalf("redact: %d %s", r.Status, r.Body)
	}
	b.open("#/ns/" + ns + "/m/drink?user_id=alice&after=redaction")
	b.wait("#history li.redacted")
	var marks []string
	b.eval(`[...document.querySelectorAll('#history li')].map(li => li.className)`, &marks)
	if len(marks) == 0 || marks[0] != "redacted" {
		t.Errorf("the timeline's versions are marked %v; want the first redacted", marks)
	}
	if text := b.text("#history"); strings.Contains(text, "green tea") {
		t.Errorf("the timeline still shows the redacted value: %s", text)
	}
	b.shot("06-memory-redacted")

	checkSearchBars(t, b, admin, ns)
	// Compared side by side with rrf.
	b.open("#/ns/" + ns + "/search?q=what+tea+does+alice+drink&top_k=5&user_id=alice&compare=mode%3Arrf")
	b.wait(`section.result[data-mode="rrf"] .hit .bar`)
	b.shot("08-search-compare")

	checkEntityGraph(t, b, admin, ns)

	// Another org's namespace is not reachable by URL: the same name in this org
	// holds nothing, and the other org's key is not found.
	b.open("#/ns/" + otherNS + "/m/launch")
	b.wait(`.error[data-error-code="RESOURCE_NOT_FOUND"]`)
	b.open("#/ns/" + otherNS)
	b.wait("#empty")
	if html := b.text("main"); strings.Contains(html, "7421") {
		t.Errorf("the console showed the other org's memory: %s", html)
	}

	checkReader(t, b, reader, ns, otherNS)
}

// checkMemoryActions pins the memory "drink" from its page, cancels a Delete from the
// keyboard, then deletes and restores it, each confirmed through the dialog.
func checkMemoryActions(t *testing.T, b *browser, admin *testenv.Client, ns string) {
	t.Helper()
	// Pin it from the page, through the confirmation dialog: a third version, and the
	// button turns to Unpin.
	b.do(chromedp.Click(chromedp.CSS(`button[data-action="pin"]`)))
	b.wait("#confirm[open] #confirm-ok")
	b.shot("04-confirm-pin")
	b.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
	b.wait(`button[data-action="unpin"]`)
	b.wait("#history li:nth-child(3)")
	if got := admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/drink?user_id=alice", nil).JSON(t)["pinned"]; got != true {
		t.Errorf("after Pin in the console the API reads pinned %v", got)
	}

	// Delete, cancelled from the keyboard: nothing happens. Its dialog's close event is
	// held back here and sent once the next question is open, as a loaded machine
	// delivers it (the browser runs input before queued tasks).
	var held bool
	b.eval(`window.addEventListener('close', (e) => e.stopImmediatePropagation(), { capture: true, once: true }), true`, &held)
	b.do(chromedp.Click(chromedp.CSS(`button[data-action="delete"]`)))
	b.wait("#confirm[open] #confirm-cancel")
	b.do(chromedp.KeyEvent(kb.Escape), chromedp.WaitNotVisible(chromedp.CSS("#confirm")))
	if r := admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/drink?user_id=alice", nil); r.Status != http.StatusOK {
		t.Errorf("after a cancelled Delete the API reads the key: %d %s", r.Status, r.Body)
	}

	// Delete, then Restore, each confirmed: the late close neither answers the new
	// question nor lets the cancelled one delete as well.
	deletesBefore := b.requests(http.MethodDelete)
	b.do(chromedp.Click(chromedp.CSS(`button[data-action="delete"]`)))
	b.wait("#confirm[open] #confirm-ok")
	var dispatched bool
	b.eval(`document.getElementById('confirm').dispatchEvent(new Event('close'))`, &dispatched)
	b.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
	b.wait("#no-head")
	b.wait(`button[data-action="restore"]`)
	// Both answers would be sent in the same task as the first's DELETE, before the page
	// drew its result.
	if n := b.requests(http.MethodDelete) - deletesBefore; n != 1 {
		t.Errorf("one confirmed Delete sent %d DELETE requests", n)
	}
	b.shot("05-memory-deleted")
	if r := admin.Do(t, http.MethodGet, "/v1/namespaces/"+ns+"/memories/drink?user_id=alice", nil); r.Status != http.StatusNotFound {
		t.Errorf("after Delete in the console the API reads the key: %d %s", r.Status, r.Body)
	}
	b.do(chromedp.Click(chromedp.CSS(`button[data-action="restore"]`)))
	b.wait("#confirm[open] #confirm-ok")
	b.do(chromedp.Click(chromedp.CSS("#confirm-ok")))
	b.wait(`button[data-action="delete"]`)
	b.wait("#value")
}

// checkSearchBars opens the search playground: each hit's leg bars carry the scores the
// API answers, and its gates are the API's.
func checkSearchBars(t *testing.T, b *browser, admin *testenv.Client, ns string) {
	t.Helper()
	b.open("#/ns/" + ns + "/search?q=" + "what+tea+does+alice+drink" + "&top_k=5&user_id=alice")
	b.wait(`.hit[data-key="drink"] .bar[data-leg="vector"]`)
	b.wait(`#verdict [data-verdict]`)
	b.shot("07-search")
	var drawn bool // the bars' widths are set through the CSSOM, which the page's CSP allows
	b.eval(`document.querySelector('.hit .bar[data-leg="vector"] > span').getBoundingClientRect().width > 0`, &drawn)
	if !drawn {
		t.Errorf("the vector bar of the best hit is not drawn")
	}
	var bars []struct {
		Key  string             `json:"key"`
		Legs map[string]float64 `json:"legs"`
	}
	b.eval(`[...document.querySelectorAll('.hit')].map(h => ({key: h.dataset.key,
		legs: Object.fromEntries([...h.querySelectorAll('.bar')].map(b => [b.dataset.leg, Number(b.dataset.score)]))}))`, &bars)
	api := admin.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search", []byte(`{"query": "what tea does alice drink", "top_k": 5, "user_id": "alice", "mode": "weighted"}`))
	var answer struct {
		Hits []struct {
			Key    string             `json:"memory_key"`
			Scores map[string]float64 `json:"scores"`
		} `json:"hits"`
		Explain struct {
			Gates []struct{ Name string } `json:"gates"`
		} `json:"explain"`
	}
	if err := json.Unmarshal(api.Body, &answer); err != nil || api.Status != http.StatusOK {
		t.Fatalf("search through the API: %d %s", api.Status, api.Body)
	}
	if len(bars) == 0 || len(bars) != len(answer.Hits) {
		t.Fatalf("the console shows %d hits, the API answers %d", len(bars), len(answer.Hits))
	}
	for i, hit := range answer.Hits {
		if bars[i].Key != hit.Key {
			t.Errorf("hit %d: the console shows %s, the API ranks %s", i+1, bars[i].Key, hit.Key)
			continue
		}
		for _, leg := range []string{"vector", "lexical", "key", "fused"} {
			if got, want := bars[i].Legs[leg], hit.Scores[leg]; math.Abs(got-want) > 1e-9 {
				t.Errorf("hit %s: the %s bar reads %v; the API scores %v", hit.Key, leg, got, want)
			}
		}
	}
	if bars[0].Legs["vector"] <= 0 || bars[0].Legs["lexical"] <= 0 {
		t.Errorf("the best hit's bars read %v; want vector and lexical evidence", bars[0].Legs)
	}
	var gates []string
	b.eval(`[...document.querySelectorAll('tr[data-gate]')].map(r => r.dataset.gate)`, &gates)
	if len(gates) != len(answer.Explain.Gates) || len(gates) == 0 {
		t.Errorf("the console shows the gates %v; the API answered %v", gates, answer.Explain.Gates)
	}
}

// checkEntityGraph opens the entity graph of a declared entity: the user lived in Paris,
// now in Lisbon (a single-valued relation: the newer value ends the older).
func checkEntityGraph(t *testing.T, b *browser, admin *testenv.Client, ns string) {
	t.Helper()
	admin.Configure(t, ns, map[string]any{"relations": map[string]any{"lives_in": "single"}})
	for _, city := range []string{"Paris", "Lisbon"} {
		if r := admin.Put(t, ns, "home-"+strings.ToLower(city), map[string]any{"value": "I live in " + city,
			"entities":  []map[string]any{{"name": city, "type": "city"}},
			"relations": []map[string]any{{"subject": "user", "predicate": "lives_in", "object": city}}}); r.Status != http.StatusOK {
			t.Fatalf("declare %s: %d %s", city, r.Status, r.Body)
		}
	}
	b.open("#/ns/" + ns + "/graph/user?include_closed=true")
	b.wait(`svg.graph a[data-node="lisbon"]`)
	b.shot("09-graph")
	var facts map[string]string
	b.eval(`Object.fromEntries([...document.querySelectorAll('#facts tr[data-object]')].map(r => [r.dataset.object, r.dataset.open]))`, &facts)
	if facts["lisbon"] != "true" || facts["paris"] != "false" {
		t.Errorf("the graph's facts read %v; want lisbon open and paris ended", facts)
	}
	var nodes map[string]string
	b.eval(`Object.fromEntries([...document.querySelectorAll('svg.graph a[data-kind=fact]')].map(a => [a.dataset.node, a.dataset.open]))`, &nodes)
	if nodes["lisbon"] != "true" || nodes["paris"] != "false" {
		t.Errorf("the drawing's nodes read %v; want lisbon open and paris ended", nodes)
	}
}

// checkReader signs in as a reader of ns: the memory's page without a single write
// button, and no namespace beyond its own.
func checkReader(t *testing.T, b *browser, reader, ns, otherNS string) {
	t.Helper()
	b.signIn(reader)
	b.wait(`#namespaces a`)
	var listed []string
	b.eval(`[...document.querySelectorAll('#namespaces tr[data-ns]')].map(r => r.dataset.ns)`, &listed)
	if len(listed) != 1 || listed[0] != ns {
		t.Errorf("a reader limited to %s is shown the namespaces %v", ns, listed)
	}
	b.open("#/ns/" + ns + "/m/drink?user_id=alice")
	b.wait("#history li:nth-child(5)")
	if b.present("#actions") || b.present("button[data-action]") {
		t.Errorf("a reader token's page offers write actions")
	}
	b.shot("10-reader-memory")
	b.open("#/ns/" + otherNS)
	b.wait(`.error[data-error-code="RESOURCE_NOT_FOUND"]`)
	b.shot("11-reader-other-namespace")
}

// checkListed reads the namespaces view (the namespace written through the API, with
// its two memories, and not the other org's) and the memory list with its filters.
func checkListed(t *testing.T, b *browser, ns, otherNS string) {
	t.Helper()
	// The namespaces: the one written through the API, with its two memories, and
	// not the other org's.
	b.wait(`#namespaces tr[data-ns="` + ns + `"] a`)
	b.shot("01b-namespaces")
	if got := b.text(`#namespaces tr[data-ns="` + ns + `"] td:nth-child(2)`); got != "2" {
		t.Errorf("the namespaces view counts %q memories in %s; want 2", got, ns)
	}
	if b.present(`#namespaces tr[data-ns="` + otherNS + `"]`) {
		t.Errorf("the namespaces view lists the other org's namespace %s", otherNS)
	}

	// The list: the write is there, with its filters.
	b.open("#/ns/" + ns + "?user_id=alice")
	b.wait(`#memories tr[data-key="drink"]`)
	b.shot("02-memories")
	if row := b.text(`#memories tr[data-key="drink"]`); !strings.Contains(row, "green tea") || !strings.Contains(row, "preference") {
		t.Errorf("the listed row reads %q; want its value and tag", row)
	}
	b.open("#/ns/" + ns + "?user_id=alice&tags=nothing-has-this")
	b.wait("#empty")
}

// The pages are public and strict: /console leads to /console/, which answers the page
// with a Content-Security-Policy that loads nothing from elsewhere; a write method
// is no route of the console's.
func TestConsoleServesItsPagesUnderAStrictPolicy(t *testing.T) {
	_, url := env.API(t, nil)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	r, err := noRedirect.Get(url + "/console")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusMovedPermanently || r.Header.Get("Location") != "/console/" {
		t.Errorf("GET /console: %d to %q; want a redirect to /console/", r.StatusCode, r.Header.Get("Location"))
	}
	for path, typ := range map[string]string{"/console/": "text/html", "/console/app.js": "javascript", "/console/app.css": "text/css"} {
		r, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		csp := r.Header.Get("Content-Security-Policy")
		if r.StatusCode != http.StatusOK || !strings.Contains(r.Header.Get("Content-Type"), typ) {
			t.Errorf("GET %s: %d %s; want 200 %s", path, r.StatusCode, r.Header.Get("Content-Type"), typ)
		}
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/console/", nil)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != http.StatusNotFound {
		t.Errorf("POST /console/: %v %v; want 404", r, err)
	}
}

// The operator's token reaches no org's memory: the console shows it the deployment as
// health reports it to the operator (the outbox, the projection's and the index's lag
// per namespace, the worker passes and queues, the extraction queue, the erasures with
// their census, the topic's latest envelopes with their content sealed), read again
// while the view is open, and no namespace's content.
func TestConsoleShowsTheOperatorTheDeployment(t *testing.T) {
	n, url := env.API(t, nil)
	operator := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Role: auth.RoleOperator}))
	health := operator.Do(t, http.MethodGet, "/v1/health", nil).JSON(t)
	org, ns, erased := testenv.Unique(t, "org"), testenv.Unique(t, "ops"), testenv.Unique(t, "erased")
	admin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	const secret = "Alice's locker code is 5150"
	if r := admin.Put(t, ns, "locker", map[string]any{"value": secret, "user_id": "alice"}); r.Status != http.StatusOK {
		t.Fatalf("write: %d %s", r.Status, r.Body)
	}
	if r := admin.Put(t, erased, "note", map[string]any{"value": "to be erased"}); r.Status != http.StatusOK {
		t.Fatalf("write: %d %s", r.Status, r.Body)
	}
	erasure := admin.Erase(t, map[string]any{"namespace": erased})

	b := newBrowser(t, url)
	b.signIn(operator.Token)
	b.wait("#ops-deployment")
	b.wait("#ops-outbox svg polyline")
	b.wait("#ops-lag svg polyline")
	// The namespace written, with its generation; the index and projection reach it (the
	// view reads health again every 5 s until they do).
	row := `#ns-lag tr[data-org="` + org + `"][data-ns="` + ns + `"]`
	b.wait(row + `[data-projection-behind="0"] svg.mini`)
	if health["index"] != nil { // a process holding a search index: its position too
		b.wait(row + `[data-index-behind="0"]`)
	}
	// The erasure, completed with a census of no residue; the topic's latest records
	// include the namespace's write, sealed, and the erasure's record.
	b.wait(`#erasures tr[data-erasure="` + erasure["id"].(string) + `"][data-status="completed"] td[data-residue="0"]`)
	b.wait(`#topic tr[data-ns="` + ns + `"][data-type="memory.written"][data-sealed="true"]`)
	b.wait(`#topic tr[data-ns="` + erased + `"][data-type="memory.erased"]`)
	b.wait("#queues tbody tr")
	b.wait(`#extractions-by-status dd[data-count="pending"]`)
	b.shot("12-operations")
	b.do(chromedp.ScrollIntoView(chromedp.CSS("#erasures")))
	b.shot("12b-operations-erasures-topic")
	if got := b.text("#ops-deployment"); got != health["deployment_id"] {
		t.Errorf("the console shows deployment %q; health answers %v", got, health["deployment_id"])
	}
	if body := b.text("main"); strings.Contains(body, secret) || strings.Contains(body, "locker") || strings.Contains(body, "alice") {
		t.Errorf("the operator's view shows a memory's content, key or user:\n%s", body)
	}
	// The typed client reads what the view shows.
	typedHealthShows(t, operator, org, ns, erased, erasure["id"].(string))
	if b.present(`#nav a[href="#/"]`) {
		t.Errorf("the operator is offered the namespaces of an org")
	}
	// An org's token is not offered the operations.
	b.signIn(env.Token(t, n, auth.NewToken{Org: testenv.Unique(t, "org")}))
	b.wait("#open-namespace")
	if b.present(`#nav a[data-nav="ops"]`) {
		t.Errorf("an org's admin is offered the deployment's operations")
	}
}

// The agent context view packs a context as context.pack answers it: the budget and the
// tokens used (the API's own figures for the same request), each section's lines with
// their citations, which lead to the memory cited.
func TestConsolePreviewsAContextPack(t *testing.T) {
	n, url := env.API(t, nil)
	org, ns := testenv.Unique(t, "org"), testenv.Unique(t, "ctx")
	admin := testenv.NewClient(url, env.Token(t, n, auth.NewToken{Org: org}))
	for key, value := range map[string]string{"drink": "Alice drinks oolong tea every morning", "city": "Alice lives in Lisbon", "editor": "Alice writes code in Emacs"} {
		if r := admin.Put(t, ns, key, map[string]any{"value": value, "user_id": "alice"}); r.Status != http.StatusOK {
			t.Fatalf("write %s: %d %s", key, r.Status, r.Body)
		}
	}
	req, _ := json.Marshal(map[string]any{"query": "what does alice drink", "user_id": "alice", "budget_tokens": 120, "sections": []string{"facts", "recent"}})
	r := admin.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/context:pack", req)
	if r.Status != http.StatusOK {
		t.Fatalf("context.pack: %d %s", r.Status, r.Body)
	}
	want := r.JSON(t)

	b := newBrowser(t, url)
	b.signIn(admin.Token)
	b.open("#/ns/" + ns + "/context")
	b.wait("#context-form")
	b.wait(`#nav a[data-nav="context"]`)
	b.open("#/ns/" + ns + "/context?q=what+does+alice+drink&user_id=alice&budget=120&sections=facts,recent&run=1")
	b.wait("#pack-tokens")
	b.wait(`#pack [data-section="facts"] tr[data-cite] a`)
	b.shot("13-context-pack")
	var shown struct{ Tokens, Budget, Cut, Lines int }
	b.eval(`({tokens: +document.querySelector('#pack-tokens').dataset.tokens, budget: +document.querySelector('#pack-tokens').dataset.budget,
		cut: +document.querySelector('[data-cut]').dataset.cut, lines: document.querySelectorAll('#pack tr[data-cite]').length})`, &shown)
	lines := 0
	for _, sec := range want["sections"].([]any) {
		lines += len(sec.(map[string]any)["lines"].([]any))
	}
	if float64(shown.Tokens) != want["tokens"] || float64(shown.Budget) != want["budget_tokens"] || shown.Cut != len(want["cut"].([]any)) || shown.Lines != lines {
		t.Errorf("the console shows %+v; context.pack answers tokens %v of %v, %d cut, %d lines", shown, want["tokens"], want["budget_tokens"], len(want["cut"].([]any)), lines)
	}
	if shown.Tokens > shown.Budget {
		t.Errorf("the pack holds %d tokens over its budget %d", shown.Tokens, shown.Budget)
	}
	// The pack's citations, each once, as the answer lists them; and the user's
	// profile as profile.render answers it (alice has none here).
	var cites []string
	b.eval(`[...document.querySelectorAll('#pack-citations [data-cite]')].map((e) => e.dataset.cite)`, &cites)
	if wantCites := want["citations"].([]any); len(cites) != len(wantCites) || len(cites) == 0 || cites[0] != wantCites[0] {
		t.Errorf("the console lists citations %v; context.pack answers %v", cites, wantCites)
	}
	b.wait(`#profile[data-citations="0"]`)
	if got := b.text("#profile"); !strings.Contains(got, "no profile") {
		t.Errorf("alice, with no profile, is shown %q", got)
	}
	if !strings.Contains(b.text("#pack-block"), "oolong") {
		t.Errorf("the block shown does not hold the fact searched for:\n%s", b.text("#pack-block"))
	}
	// A citation leads to the memory it cites.
	b.do(chromedp.Click(chromedp.CSS(`#pack [data-section="facts"] tr[data-cite] a`)))
	b.wait("#history")
	b.shot("14-context-cited-memory")
	if got := b.text("#value"); !strings.Contains(got, "Alice") {
		t.Errorf("the cited memory's page shows %q", got)
	}
}

// typedHealthShows reads the operator's health through the Go client with every include
// the Operations view asks for, and checks it holds what the view showed: the namespace
// caught up, the erasure completed with no residue, the namespace's write sealed on the
// topic and the erasure's record there, the extraction queue's counts, and the passes
// with their queues.
func typedHealthShows(t *testing.T, operator *testenv.Client, org, ns, erased, erasureID string) {
	t.Helper()
	h, err := operator.Typed(t).Health(context.Background(), "postgres", "lag", "workers", "namespaces", "erasures", "extractions", "topic")
	if err != nil {
		t.Fatalf("typed health: %v", err)
	}
	if h.Namespaces == nil || h.Erasures == nil || h.Extractions == nil || h.TopicLatest == nil {
		t.Fatalf("typed health lacks an include: namespaces %v, erasures %v, extractions %v, topic %v",
			h.Namespaces, h.Erasures, h.Extractions, h.TopicLatest)
	}
	listed := false
	for _, s := range h.Namespaces.Listed {
		listed = listed || (s.Org == org && s.Namespace == ns && s.Generation > 0 && s.ProjectionBehind == 0)
	}
	if !listed || h.Namespaces.Total < int64(len(h.Namespaces.Listed)) {
		t.Errorf("typed health's namespaces (total %d) do not list %s/%s caught up", h.Namespaces.Total, org, ns)
	}
	completed := false
	for _, e := range h.Erasures.Latest {
		completed = completed || (e.ID == erasureID && e.Org == org && e.Status == "completed" && e.ResidueCount != nil && *e.ResidueCount == 0 && len(e.Census) > 0)
	}
	if !completed || h.Erasures.ByStatus["completed"] < 1 {
		t.Errorf("typed health's erasures do not hold %s completed with a census and no residue: %+v", erasureID, h.Erasures)
	}
	if _, ok := h.Extractions.ByStatus["pending"]; !ok || h.Extractions.Error != "" {
		t.Errorf("typed health's extractions count no status: %+v", h.Extractions)
	}
	written, erasedRec := false, false
	for _, r := range h.TopicLatest.Records {
		written = written || (r.Namespace == ns && r.Type == "memory.written" && r.Sealed)
		erasedRec = erasedRec || (r.Namespace == erased && r.Type == "memory.erased")
	}
	if !written || !erasedRec || h.TopicLatest.Error != "" {
		t.Errorf("typed health's topic_latest lacks %s's sealed write (%v) or %s's erasure (%v): %s", ns, written, erased, erasedRec, h.TopicLatest.Error)
	}
	queued := false
	for _, p := range h.Passes {
		queued = queued || p.Queue != nil
	}
	if !queued {
		t.Errorf("typed health's passes carry no queue with include workers: %+v", h.Passes)
	}
}
