package command

import (
	"archive/tar"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/loomplane/loom/internal/httperr"
)

// documentsFromTar reads a tar archive's regular files, in the archive's order, each a
// document named prefix + its path (a leading ./ dropped). Directories, links and
// the like are skipped; a file over MaxDocumentBytes is refused at the submission's
// checks (bodies are read one byte past it, never further).
func documentsFromTar(r io.Reader, prefix string, tags []string) ([]DocumentInput, error) {
	tr := tar.NewReader(r)
	var out []DocumentInput
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, httperr.Validation("body", "the tar archive does not read: "+err.Error())
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if len(out) == MaxIngestFiles {
			return nil, httperr.Validation("documents", fmt.Sprintf("at most %d documents a job", MaxIngestFiles))
		}
		body, err := io.ReadAll(io.LimitReader(tr, MaxDocumentBytes+1))
		if err != nil {
			return nil, httperr.Validation("body", "the tar archive does not read: "+err.Error())
		}
		name := strings.TrimPrefix(path.Clean(h.Name), "./")
		out = append(out, bodyInput(prefix+name, path.Base(name), "", tags, body))
	}
	if len(out) == 0 {
		return nil, httperr.Validation("body", "the tar archive holds no regular file")
	}
	return out, nil
}

// bodyInput is an uploaded file as a write's input: its bytes as base64, its format
// named by its file name or its content type.
func bodyInput(uri, name, contentType string, tags []string, body []byte) DocumentInput {
	return DocumentInput{SourceURI: uri, Name: name, ContentType: contentType, Tags: tags,
		ContentBase64: base64.StdEncoding.EncodeToString(body)}
}
