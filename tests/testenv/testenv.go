// Package testenv runs Loom for the end-to-end and fault suites: the real stores from
// internal/devstack (a private Postgres, ClickHouse 18.16, kfake over TCP) and loomd's
// roles in-process, each started and stopped by the test that needs it.
package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loomplane/loom/cmd/loomd/app"
	"github.com/loomplane/loom/internal/auth"
	"github.com/loomplane/loom/internal/config"
	"github.com/loomplane/loom/internal/devstack"
	"github.com/loomplane/loom/projector"
	"github.com/loomplane/loom/relay"
)

// Env is one set of running stores, migrated.
type Env struct {
	Stack *devstack.Stack
	base  config.Config
	log   *slog.Logger

	sharedMu sync.Mutex
	shared   map[string]*sharedProcess
	topics   topicReads
}

// Options shape the stores an Env runs.
type Options struct {
	// SyncStandby runs Postgres as a primary with a synchronous standby, and the base
	// configuration with LOOM_PG_DURABILITY=synchronous; otherwise local.
	SyncStandby bool
	// Unmigrated leaves both stores empty: the suite's own processes migrate them.
	Unmigrated bool
	// ClickHouseSearch runs the suite's processes with LOOM_SEARCH_INDEX=clickhouse:
	// their searches and peer reads read ClickHouse behind the projection's watermark,
	// for suites that test the projection through them (a test opts back in to the
	// index with its config mod).
	ClickHouseSearch bool
	// Prebuild names the command packages the package's tests run (Build): they are
	// built in the background from the start of the run.
	Prebuild []string
}

// Start starts the stores and migrates them. A store that cannot start is an error:
// the suites fail, they never skip.
func Start(ctx context.Context, opts Options) (*Env, error) {
	cfg, err := config.Load(func(string) string { return "" })
	if err != nil {
		return nil, err
	}
	stack, err := devstack.Start(ctx, devstack.Options{Topics: []string{cfg.Pipeline.Topic}, Partitions: 4, SyncStandby: opts.SyncStandby,
		TempRoot: memoryRoot()})
	if err != nil {
		return nil, fmt.Errorf("start the test stores: %w", err)
	}
	// One Postgres has no standby to wait for: it runs with local durability;
	// SyncStandby, synchronous.
	stack.Configure(&cfg)
	cfg.Roles = nil
	cfg.Kafka.TopicPartitions = 4
	cfg.PG.PoolMax = 20
	cfg.Projector.Interval = 50 * time.Millisecond
	// A test waits for the projection after its writes: the pace a steady load gets
	// (LOOM_PROJECTOR_BUSY_INTERVAL_MS, fewer parts for a staler projection) would only
	// stretch its waits. The pacer's own tests cover it (projector/pace_test.go).
	cfg.Projector.BusyInterval = 0
	cfg.Relay.Poll = 200 * time.Millisecond
	// A search's usage goes out as its namespace's memory.usage_recorded record, which
	// takes a seq whenever the publication runs: a test that counts a namespace's seqs
	// would see one arrive at any time. The tests of usage turn the publication on.
	cfg.Command.UsagePublishInterval = 0
	if opts.ClickHouseSearch {
		cfg.SearchIndex.Mode = config.SearchIndexClickHouse
	}
	// The package's processes share one index checkpoint directory (removed with the
	// stores): a process warms from the last checkpoint any of them wrote and the topic's
	// tail, not from the whole topic. Over 20,000 records a process was warm 0.18 to 0.23 s
	// after its open against 1.06 to 1.44 s replaying, its stop 10 to 60 ms longer (the
	// checkpoint it writes). A test of the replay itself turns it off (""), a test of the
	// checkpoint takes a directory of its own.
	cfg.SearchIndex.CheckpointDir = filepath.Join(stack.Dir(), "index-checkpoints")
	level := slog.LevelWarn
	if os.Getenv("LOOM_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	e := &Env{Stack: stack, base: cfg, log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))}
	if opts.Unmigrated {
		return e, nil
	}
	n, err := app.Open(ctx, cfg, e.log)
	if err != nil {
		stack.Stop()
		return nil, fmt.Errorf("migrate the test stores: %w", err)
	}
	n.Close()
	e.base.Boot.Migrate = false
	return e, nil
}

// memoryRoot is /dev/shm where the machine has one: the stores' files then live in
// memory. ClickHouse writes every insert as a new part, a directory of files, and a
// merge writes and deletes them again; on ext4 creating and unlinking those files took
// most of the test server's CPU (kernel time in inode allocation). The data is thrown
// away after the run, and a killed store's files stay until the run removes them.
// minMemoryRoot is the free space /dev/shm must have to hold a package's stores.
const minMemoryRoot = 4 << 30

func memoryRoot() string {
	const shm = "/dev/shm"
	if st, err := os.Stat(shm); err != nil || !st.IsDir() {
		return ""
	}
	// A container's /dev/shm is often 64 MiB: a package's stores grow past that.
	var fs syscall.Statfs_t
	if err := syscall.Statfs(shm, &fs); err != nil || fs.Bavail*uint64(fs.Bsize) < minMemoryRoot {
		return ""
	}
	probe, err := os.MkdirTemp(shm, "loom-probe-")
	if err != nil {
		return ""
	}
	os.Remove(probe)
	return shm
}

// Main runs a package's tests over one Env, in m's TestMain; background, when not
// nil, starts what every test of the package shares and runs until the tests end.
func Main(m *testing.M, env **Env, background func(context.Context, *Env) error) {
	os.Exit(Run(m, Options{}, env, background))
}

// MainWith is Main over stores shaped by opts.
func MainWith(m *testing.M, opts Options, env **Env, background func(context.Context, *Env) error) {
	os.Exit(Run(m, opts, env, background))
}

// Run is MainWith that returns the exit code instead of exiting, for a TestMain that
// has its own cleanup to do.
func Run(m *testing.M, opts Options, env **Env, background func(context.Context, *Env) error) int {
	prebuild(opts.Prebuild)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	e, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		removeBuilds()
		return 1
	}
	*env = e
	bg, stopBG := context.WithCancel(context.Background())
	if background != nil {
		if err := background(bg, e); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: background:", err)
			stopBG()
			e.Stack.Stop()
			removeBuilds()
			return 1
		}
	}
	code := m.Run()
	e.stopShared()
	removeBuilds()
	stopBG()
	time.Sleep(200 * time.Millisecond)
	if err := e.Stack.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stop:", err)
	}
	return code
}

// Config returns the base configuration with mod applied.
func (e *Env) Config(mod func(*config.Config)) config.Config {
	c := e.base
	c.Roles = nil
	if mod != nil {
		mod(&c)
	}
	if shared := e.base.SearchIndex.CheckpointDir; shared != "" && c.SearchIndex.CheckpointDir == shared {
		c.SearchIndex.CheckpointDir = filepath.Join(shared, checkpointScope(c))
	}
	return c
}

// checkpointScope names the shared checkpoint directory of the processes whose
// checkpoints fit each other: a process refuses (and deletes) one written on another
// topic, under another KEK or another budget, so processes configured otherwise would
// only delete each other's.
func checkpointScope(c config.Config) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", c.Pipeline.Topic, c.Keys.KEK, c.SearchIndex.MaxBytes))
	return hex.EncodeToString(sum[:6])
}

// Open opens a process (no role running) and closes it when the test ends; opts
// inject faults into its roles.
func (e *Env) Open(t testing.TB, mod func(*config.Config), opts ...app.Option) *app.Process {
	t.Helper()
	return e.OpenLogged(t, mod, e.log, opts...)
}

// OpenLogged is Open with the process logging to log (a test that asserts on warnings).
func (e *Env) OpenLogged(t testing.TB, mod func(*config.Config), log *slog.Logger, opts ...app.Option) *app.Process {
	t.Helper()
	n, err := app.Open(context.Background(), e.Config(mod), log, opts...)
	if err != nil {
		t.Fatalf("open a loomd process: %v", err)
	}
	t.Cleanup(n.Close)
	return n
}

// API serves the command and query roles on a free loopback port until the test ends
// and returns its base URL.
func (e *Env) API(t testing.TB, mod func(*config.Config), opts ...app.Option) (*app.Process, string) {
	t.Helper()
	n, url, _ := e.Serve(t, []string{"api"}, mod, opts...)
	return n, url
}

// SharedAPI serves the command and query roles of the base configuration to every
// test of the package that takes it: one process, started at the first call and
// stopped when the package's tests end, so a test pays no process start (its pools,
// its index's replay of the whole topic). A test that asserts on a process of its own
// (its metrics, caches, index or restart) takes API instead.
func (e *Env) SharedAPI(t testing.TB) (*app.Process, string) {
	t.Helper()
	return e.Shared(t, "api", nil)
}

// SharedOrgAPI is OrgAPI over SharedAPI: a fresh org and an admin client of it.
func (e *Env) SharedOrgAPI(t testing.TB) (*app.Process, *Client, string) {
	t.Helper()
	n, url := e.SharedAPI(t)
	org := Unique(t, "org")
	return n, NewClient(url, e.Token(t, n, auth.NewToken{Org: org})), org
}

// Shared is SharedAPI of the API process called name, configured by mod at its first
// call (the tests that share it share its configuration).
func (e *Env) Shared(t testing.TB, name string, mod func(*config.Config)) (*app.Process, string) {
	t.Helper()
	e.sharedMu.Lock()
	if e.shared == nil {
		e.shared = map[string]*sharedProcess{}
	}
	s := e.shared[name]
	if s == nil {
		s = &sharedProcess{}
		e.shared[name] = s
	}
	e.sharedMu.Unlock()
	s.once.Do(func() { s.err = s.start(e, mod) })
	if s.err != nil {
		t.Fatalf("start the shared process %s: %v", name, s.err)
	}
	return s.n, s.url
}

// sharedProcess is a process the package's tests share, running until stopShared.
type sharedProcess struct {
	once sync.Once
	err  error
	n    *app.Process
	url  string
	stop context.CancelFunc
	done chan error
}

func (s *sharedProcess) start(e *Env, mod func(*config.Config)) error {
	roles, err := config.ParseRoles("api")
	if err != nil {
		return err
	}
	n, err := app.Open(context.Background(), e.Config(func(c *config.Config) {
		// Its periodic passes stay off, as they were in the short-lived process each
		// test ran before (their first tick came after the test): an expiry sweep or an
		// erasure recovery must not act in the middle of another test.
		c.Command.SweepInterval, c.Command.Erasure.RecoveryInterval = 0, 0
		if mod != nil {
			mod(c)
		}
		c.Roles = roles
	}), e.log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.Close()
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	s.n, s.url, s.stop, s.done = n, "http://"+ln.Addr().String(), stop, make(chan error, 1)
	go func() { s.done <- n.Run(ctx, ln) }()
	return nil
}

// stopShared stops the shared processes once the package's tests have ended.
func (e *Env) stopShared() {
	e.sharedMu.Lock()
	defer e.sharedMu.Unlock()
	for name, s := range e.shared {
		if s.n == nil {
			continue
		}
		s.stop()
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			fmt.Fprintf(os.Stderr, "testenv: the shared process %s did not stop within 30s\n", name)
		}
		s.n.Close()
	}
}

// Serve runs a process with roles on a free loopback port until stop is called (or the
// test ends) and returns its base URL.
func (e *Env) Serve(t testing.TB, roles []string, mod func(*config.Config), opts ...app.Option) (n *app.Process, url string, stop func()) {
	t.Helper()
	parsed, err := config.ParseRoles(strings.Join(roles, ","))
	if err != nil {
		t.Fatal(err)
	}
	n = e.Open(t, func(c *config.Config) {
		if mod != nil {
			mod(c)
		}
		c.Roles = parsed
	}, opts...)
	url, stop = e.ServeProcess(t, n)
	return n, url, stop
}

// ServeProcess runs an opened process's HTTP server and roles on a free loopback port until
// stop is called (or the test ends) and returns its base URL.
func (e *Env) ServeProcess(t testing.TB, n *app.Process) (url string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop = e.run(t, n.Cfg.Roles.String(), func(ctx context.Context) error { return n.Run(ctx, ln) })
	return "http://" + ln.Addr().String(), stop
}

// Relay runs a relay (configured by mods) until the returned stop is called (or the
// test ends). It returns a channel that receives Run's result.
func (e *Env) Relay(t testing.TB, faults relay.Faults, mods ...func(*config.Config)) (stop func(), done <-chan error) {
	t.Helper()
	n := e.Open(t, apply(mods), app.WithRelayFaults(faults))
	return e.runDone(t, "relay", n.RunRelay)
}

// Projector runs projection name (configured by mods) until stop is called (or the
// test ends).
func (e *Env) Projector(t testing.TB, name string, mods ...func(*config.Config)) (stop func()) {
	t.Helper()
	return e.FaultyProjector(t, name, projector.Faults{}, mods...)
}

// FaultyProjector is Projector with faults injected.
func (e *Env) FaultyProjector(t testing.TB, name string, faults projector.Faults, mods ...func(*config.Config)) (stop func()) {
	t.Helper()
	n := e.Open(t, func(c *config.Config) { c.Pipeline.Projection = name; apply(mods)(c) }, app.WithProjectorFaults(faults))
	stop, _ = e.runDone(t, "projector "+name, n.RunProjector)
	return stop
}

func apply(mods []func(*config.Config)) func(*config.Config) {
	return func(c *config.Config) {
		for _, m := range mods {
			m(c)
		}
	}
}

func (e *Env) run(t testing.TB, what string, fn func(context.Context) error) func() {
	stop, _ := e.runDone(t, what, fn)
	return stop
}

func (e *Env) runDone(t testing.TB, what string, fn func(context.Context) error) (func(), <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	result := make(chan error, 1)
	go func() {
		err := fn(ctx)
		done <- err
		result <- err
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop within 30s", what)
		}
	}
	t.Cleanup(stop)
	return stop, result
}

// Token creates a token in org with role and returns its secret.
func (e *Env) Token(t testing.TB, n *app.Process, tok auth.NewToken) string {
	t.Helper()
	if tok.Role == "" {
		tok.Role = auth.RoleAdmin
	}
	secret, _, err := n.Tokens.Create(context.Background(), tok)
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	return secret
}

// Client calls the REST API as one token.
type Client struct {
	URL   string
	Token string
	HTTP  *http.Client
}

// NewClient returns a client of base URL acting as token.
func NewClient(url, token string) *Client {
	return &Client{URL: url, Token: token, HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// Response is an answer: its status and body.
type Response struct {
	Status int
	Body   []byte
}

// JSON decodes the body into a map.
func (r *Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("answer is not JSON (%d): %s", r.Status, r.Body)
	}
	return m
}

// ErrorCode is the envelope's error code ("" when the answer is not an error).
func (r *Response) ErrorCode() string {
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(r.Body, &env)
	return env.Error.Code
}

// Do sends a request with a raw body (nil for none).
func (c *Client) Do(t testing.TB, method, path string, body []byte) *Response {
	t.Helper()
	return c.DoHeaders(t, method, path, body, nil)
}

// DoHeaders sends a request with extra headers.
func (c *Client) DoHeaders(t testing.TB, method, path string, body []byte, headers map[string]string) *Response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, c.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &Response{Status: resp.StatusCode, Body: b}
}

// Call is one request of a table-driven check.
type Call struct{ Method, Path, Body string }

// MemoryCalls is one call of each memory route family in ns: a write, a point read
// (Postgres) and a search (ClickHouse behind the barrier).
func MemoryCalls(ns string) []Call {
	return []Call{
		{http.MethodPut, "/v1/namespaces/" + ns + "/memories/k", `{"value": "x"}`},
		{http.MethodGet, "/v1/namespaces/" + ns + "/memories/k", ""},
		{http.MethodPost, "/v1/namespaces/" + ns + "/memories:search", `{"query": "x"}`},
	}
}

// Call sends a Call.
func (c *Client) Call(t testing.TB, call Call) *Response {
	t.Helper()
	var body []byte
	if call.Body != "" {
		body = []byte(call.Body)
	}
	return c.Do(t, call.Method, call.Path, body)
}

// Retryable503 reports whether the answer is a retryable 503 with the error code.
func (r *Response) Retryable503(t testing.TB, code string) bool {
	t.Helper()
	e, _ := r.JSON(t)["error"].(map[string]any)
	return r.Status == http.StatusServiceUnavailable && r.ErrorCode() == code && e["retryable"] == true
}

// Set writes a memory (memory.set) and fails the test unless it answers 200.
func (c *Client) Set(t testing.TB, ns, key string, value any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"value": value})
	r := c.Do(t, http.MethodPut, "/v1/namespaces/"+ns+"/memories/"+key, b)
	if r.Status != http.StatusOK {
		t.Fatalf("set %s/%s: %d %s", ns, key, r.Status, r.Body)
	}
	return r.JSON(t)
}

// Configure replaces a namespace's configuration (namespace.configure).
func (c *Client) Configure(t testing.TB, ns string, cfg map[string]any) {
	t.Helper()
	b, _ := json.Marshal(cfg)
	if r := c.Do(t, http.MethodPut, "/v1/namespaces/"+ns, b); r.Status != http.StatusOK {
		t.Fatalf("configure %s: %d %s", ns, r.Status, r.Body)
	}
}

// AppendOnly configures namespaces to keep every write as written: for tests of the
// pipeline, whose writes must not be judged against each other.
func (c *Client) AppendOnly(t testing.TB, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		c.Configure(t, ns, map[string]any{"conflict_policy": "append_only"})
	}
}

// Search runs memory.search and returns the raw answer.
func (c *Client) Search(t testing.TB, ns, query string, topK int) *Response {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"query": query, "top_k": topK})
	return c.Do(t, http.MethodPost, "/v1/namespaces/"+ns+"/memories:search", b)
}

// Unique returns a name unique to this test and call, valid as a namespace.
func Unique(t testing.TB, prefix string) string {
	name := strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, strings.ToLower(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("%s-%s-%d", prefix, name, time.Now().UnixNano()%1_000_000_000)
}

// RunPipeline runs a relay and the projection "main" until ctx ends: the background a
// suite that does not stop them itself writes and searches against.
func (e *Env) RunPipeline(ctx context.Context) error {
	n, err := app.Open(ctx, e.Config(nil), e.log)
	if err != nil {
		return err
	}
	go func() {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); n.RunRelay(ctx) }()
		go func() { defer wg.Done(); n.RunProjector(ctx) }()
		wg.Wait()
		n.Close()
	}()
	return nil
}

// ServeURL runs an opened process until the test ends and returns its base URL.
func (e *Env) ServeURL(t testing.TB, n *app.Process) string {
	t.Helper()
	url, _ := e.ServeProcess(t, n)
	return url
}
