package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loomplane/loom/client"
)

// ingestBatchBytes bounds the files of one job the CLI submits, so a request (their
// base64 in JSON) stays under the server's default body limit (8 MiB,
// LOOM_HTTP_BODY_LIMIT_BYTES); a larger corpus goes as several jobs.
const ingestBatchBytes = 5 << 20

// ingestBatchFiles bounds the files of one job (knowledge.ingest takes 1,000).
const ingestBatchFiles = 500

func runKnowledge(ctx context.Context, args []string) error {
	if len(args) == 0 || isHelp(args) {
		fmt.Printf("Usage:\n%s", usageOf("knowledge"))
		if len(args) == 0 {
			return usageError{errors.New("knowledge: want ingest")}
		}
		return errHelpShown
	}
	if args[0] == "ingest" {
		return runKnowledgeIngest(ctx, args[1:], os.Stdout, os.Stderr)
	}
	return usageError{fmt.Errorf("knowledge: unknown command %q: want ingest", args[0])}
}

// ingestFile is a file the CLI found to ingest.
type ingestFile struct {
	path, uri string
	size      int64
}

// runKnowledgeIngest submits the files under PATHs (a folder: every regular file in
// it, named by its path under the folder; a file: named by its base name) as
// knowledge.ingest jobs to the server at --url, and follows each to its end with a
// progress bar on stderr. It exits 1 when a file failed.
func runKnowledgeIngest(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("knowledge ingest", flag.ContinueOnError)
	url := fset.String("url", "http://localhost:8080", "the Loom server's base URL")
	tokenFile := fset.String("token-file", "", "a file holding the token (default: LOOM_TOKEN)")
	ns := fset.String("namespace", "", "the namespace to ingest into (required)")
	prefix := fset.String("prefix", "", "prepended to each document's source URI")
	tags := fset.String("tags", "", "comma-separated tags for every document")
	user := fset.String("user", "", "the user the documents are written for (default: the namespace's, every user's)")
	noWait := fset.Bool("no-wait", false, "submit and print the job ids; do not follow them")
	fset.SetOutput(io.Discard)
	if err := fset.Parse(args); errors.Is(err, flag.ErrHelp) {
		printHelp(os.Stdout, fset)
		return errHelpShown
	} else if err != nil {
		return usageError{fmt.Errorf("knowledge ingest: %w", err)}
	}
	if *ns == "" || fset.NArg() == 0 {
		return usageError{errors.New("knowledge ingest: --namespace and at least one PATH are required")}
	}
	token := os.Getenv("LOOM_TOKEN")
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("knowledge ingest: read the token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return usageError{errors.New("knowledge ingest: --token-file (or LOOM_TOKEN) is required")}
	}
	c, err := client.New(*url, token, client.WithRetry(client.Retry{MaxElapsed: 30 * time.Second, IdempotentWrites: true}))
	if err != nil {
		return usageError{err}
	}
	files, err := findIngestFiles(fset.Args(), *prefix)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return errors.New("knowledge ingest: no file to ingest under the paths given")
	}
	var tagList []string
	for _, t := range strings.Split(*tags, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tagList = append(tagList, t)
		}
	}
	var total client.IngestionStatus
	for _, batch := range ingestBatches(files) {
		docs := make([]client.DocumentInput, len(batch))
		for i, f := range batch {
			body, err := os.ReadFile(f.path)
			if err != nil {
				return fmt.Errorf("knowledge ingest: read %s: %w", f.path, err)
			}
			docs[i] = client.DocumentInput{SourceURI: f.uri, Name: filepath.Base(f.path), Tags: tagList,
				ContentBase64: base64.StdEncoding.EncodeToString(body)}
		}
		job, err := c.IngestFor(ctx, *ns, *user, docs)
		if err != nil {
			return fmt.Errorf("knowledge ingest: submit: %w", err)
		}
		if *noWait {
			fmt.Fprintf(stdout, "%s\t%d files\n", job.IngestionID, job.Total)
			continue
		}
		st, err := followIngest(ctx, c, *ns, job.IngestionID, stderr)
		if err != nil {
			return err
		}
		for _, f := range st.Files {
			if f.State == "failed" {
				fmt.Fprintf(stdout, "failed\t%s\t%s: %s\n", f.SourceURI, f.ErrorCode, f.ErrorMessage)
			}
		}
		total.Total += st.Total
		total.Written += st.Written
		total.Unchanged += st.Unchanged
		total.Failed += st.Failed
		total.Chunks += st.Chunks
		total.Bytes += st.Bytes
		if st.State != "completed" {
			return fmt.Errorf("knowledge ingest: job %s ended %s", st.IngestionID, st.State)
		}
	}
	if *noWait {
		return nil
	}
	fmt.Fprintf(stdout, "ingested %d files into %s: %d written, %d unchanged, %d failed; %d chunks, %d bytes\n",
		total.Total, *ns, total.Written, total.Unchanged, total.Failed, total.Chunks, total.Bytes)
	if total.Failed > 0 {
		return fmt.Errorf("knowledge ingest: %d file(s) failed", total.Failed)
	}
	return nil
}

// findIngestFiles lists the regular, non-empty, non-hidden files under paths.
func findIngestFiles(paths []string, prefix string) ([]ingestFile, error) {
	var out []ingestFile
	seen := map[string]string{}
	add := func(path, uri string, size int64) error {
		uri = prefix + filepath.ToSlash(uri)
		if other, dup := seen[uri]; dup {
			return usageError{fmt.Errorf("knowledge ingest: %s and %s would both be %q; ingest them separately or with --prefix", other, path, uri)}
		}
		seen[uri] = path
		out = append(out, ingestFile{path: path, uri: uri, size: size})
		return nil
	}
	for _, root := range paths {
		info, err := os.Stat(root)
		if err != nil {
			return nil, fmt.Errorf("knowledge ingest: %w", err)
		}
		if !info.IsDir() {
			if err := add(root, filepath.Base(root), info.Size()); err != nil {
				return nil, err
			}
			continue
		}
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.HasPrefix(d.Name(), ".") && path != root {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			info, err := d.Info()
			if err != nil || info.Size() == 0 {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			return add(path, rel, info.Size())
		})
		if err != nil {
			return nil, fmt.Errorf("knowledge ingest: %w", err)
		}
	}
	return out, nil
}

// ingestBatches cuts files into jobs of at most ingestBatchBytes and ingestBatchFiles
// (a larger file goes alone, and the server judges it).
func ingestBatches(files []ingestFile) [][]ingestFile {
	var out [][]ingestFile
	var cur []ingestFile
	var size int64
	for _, f := range files {
		if len(cur) > 0 && (size+f.size > ingestBatchBytes || len(cur) == ingestBatchFiles) {
			out, cur, size = append(out, cur), nil, 0
		}
		cur, size = append(cur, f), size+f.size
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// followIngest polls a job until it ends, drawing its progress on w.
func followIngest(ctx context.Context, c *client.Client, ns, id string, w io.Writer) (*client.IngestionStatus, error) {
	for {
		st, err := c.IngestStatus(ctx, ns, id)
		if err != nil {
			return nil, fmt.Errorf("knowledge ingest: status of %s: %w", id, err)
		}
		const width = 30
		done := 0
		if st.Total > 0 {
			done = width * st.Processed / st.Total
		}
		fmt.Fprintf(w, "\r%s [%s%s] %d/%d files, %d failed", id[:8], strings.Repeat("#", done), strings.Repeat(".", width-done),
			st.Processed, st.Total, st.Failed)
		if st.Ended() {
			fmt.Fprintln(w)
			return st, nil
		}
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return nil, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}
