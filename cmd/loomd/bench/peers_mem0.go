package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// mem0Harness is the node program that drives mem0's Memory, and the package.json that
// pins it and its SQLite binding.
//
//go:embed peers/mem0_peer.mjs peers/package.json
var mem0Harness embed.FS

// peerMem0 runs mem0's open-source store through the node harness, installed (once per
// package.json) under the user's cache directory.
func (r *runner) peerMem0(ctx context.Context, embedURL string, c peerCorpus, cps []peerCheckpoint) (*peerRun, error) {
	dir, err := r.installMem0(ctx)
	if err != nil {
		return nil, err
	}
	data, err := os.MkdirTemp("", "loom-bench-mem0-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(data)
	type query struct {
		Query string `json:"query"`
	}
	type checkpoint struct {
		Size    int     `json:"size"`
		Queries []query `json:"queries"`
	}
	in := struct {
		BaseURL     string       `json:"base_url"`
		Model       string       `json:"model"`
		Dim         int          `json:"dim"`
		Dir         string       `json:"dir"`
		Facts       []string     `json:"facts"`
		Checkpoints []checkpoint `json:"checkpoints"`
	}{BaseURL: embedURL, Model: peerEmbedModel, Dim: peerEmbedDim, Dir: data, Facts: c.facts}
	for _, cp := range cps {
		qs := make([]query, len(cp.targets))
		for i, t := range cp.targets {
			qs[i] = query{c.query(t)}
		}
		in.Checkpoints = append(in.Checkpoints, checkpoint{Size: cp.size, Queries: qs})
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "node", "mem0_peer.mjs")
	cmd.Dir = dir
	// mem0 sends telemetry unless told not to; nothing here may reach the network.
	cmd.Env = append(os.Environ(), "MEM0_TELEMETRY=false", "HOME="+data)
	cmd.Stdin = bytes.NewReader(raw)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	r.progress("    mem0: %d facts through node (mem0ai %s)", len(c.facts), PeerVersions["mem0ai"])
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("the mem0 harness: %w: %s", err, outputEnd(stderr.String()))
	}
	var out struct {
		AddMS       []float64 `json:"add_ms"`
		Checkpoints []struct {
			Size     int   `json:"size"`
			RSSBytes int64 `json:"rss_bytes"`
			Searches []struct {
				MS  float64 `json:"ms"`
				Top string  `json:"top"`
			} `json:"searches"`
		} `json:"checkpoints"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("read the mem0 harness's answer: %w: %s", err, outputEnd(stdout.String()))
	}
	if len(out.AddMS) != len(c.facts) || len(out.Checkpoints) != len(cps) {
		return nil, fmt.Errorf("the mem0 harness added %d of %d facts, %d of %d checkpoints", len(out.AddMS), len(c.facts), len(out.Checkpoints), len(cps))
	}
	run := &peerRun{addMS: out.AddMS}
	for i, cp := range out.Checkpoints {
		at := peerAt{size: cp.Size, rssBytes: cp.RSSBytes}
		for j, s := range cp.Searches {
			at.searchMS = append(at.searchMS, s.MS)
			if s.Top == c.facts[cps[i].targets[j]] {
				at.hits++
			}
		}
		run.at = append(run.at, at)
	}
	return run, nil
}

// installMem0 writes the harness into a cache directory named by its package.json and
// installs its packages there: npm without the peers' optional peer dependencies, then
// better-sqlite3's binding built from source against the installed node's headers (its
// prebuilt download is not reachable offline). An installed directory is reused.
func (r *runner) installMem0(ctx context.Context) (string, error) {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("the peers scenario runs mem0 with %s, which is not installed (apt-get install nodejs npm): %w", tool, err)
		}
	}
	pkg, err := mem0Harness.ReadFile("peers/package.json")
	if err != nil {
		return "", err
	}
	script, err := mem0Harness.ReadFile("peers/mem0_peer.mjs")
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256(pkg)
	dir := filepath.Join(cache, "loom", "bench-peers-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, body := range map[string][]byte{"package.json": pkg, "mem0_peer.mjs": script} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			return "", err
		}
	}
	run := func(what string, at string, name string, args ...string) error {
		r.progress("    mem0: %s (once; minutes on a small machine)", what)
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = at
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w: %s", what, err, outputEnd(out.String()))
		}
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "mem0ai", "package.json")); errors.Is(err, os.ErrNotExist) {
		if err := run("npm install", dir, "npm", "install", "--no-audit", "--no-fund", "--legacy-peer-deps"); err != nil {
			return "", err
		}
	}
	sqlite := filepath.Join(dir, "node_modules", "better-sqlite3")
	if _, err := os.Stat(filepath.Join(sqlite, "build", "Release", "better_sqlite3.node")); errors.Is(err, os.ErrNotExist) {
		node, err := exec.LookPath("node")
		if err != nil {
			return "", err
		}
		if resolved, err := filepath.EvalSymlinks(node); err == nil {
			node = resolved
		}
		// node's headers sit under its prefix (Debian's nodejs: /usr/include/node).
		nodeDir := filepath.Dir(filepath.Dir(node))
		gyp := filepath.Join(dir, "node_modules", "node-gyp", "bin", "node-gyp.js")
		if err := run("build better-sqlite3", sqlite, "node", gyp, "rebuild", "--release", "--nodedir="+nodeDir); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// outputEnd is the end of a tool's output, for an error.
func outputEnd(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}
