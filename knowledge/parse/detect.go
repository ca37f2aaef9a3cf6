package parse

import (
	"archive/zip"
	"bytes"
	"mime"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"
)

var formatByMediaType = map[string]string{
	"text/plain":            FormatText,
	"text/markdown":         FormatMarkdown,
	"text/x-markdown":       FormatMarkdown,
	"text/html":             FormatHTML,
	"application/xhtml+xml": FormatHTML,
	"application/pdf":       FormatPDF,
	"text/csv":              FormatCSV,
	"application/csv":       FormatCSV,
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": FormatXLSX,
}

var formatByExtension = map[string]string{
	".txt":      FormatText,
	".text":     FormatText,
	".log":      FormatText,
	".md":       FormatMarkdown,
	".markdown": FormatMarkdown,
	".mdown":    FormatMarkdown,
	".html":     FormatHTML,
	".htm":      FormatHTML,
	".xhtml":    FormatHTML,
	".pdf":      FormatPDF,
	".csv":      FormatCSV,
	".xlsx":     FormatXLSX,
}

// DetectFormat names a document's format, or "" when it is none Parse reads. A
// specific content type decides first, then the name's extension, then the bytes:
// a PDF header, a zip holding a workbook, HTML markup, or else UTF-8 text. A generic
// content type (application/octet-stream, an empty one) leaves it to the others. A
// document declared as one format and holding another is refused by that format's
// reader as malformed, not read as the other. text/plain yields to an extension
// naming another text format (clients send it for any text file), and another
// text/* type is read as text.
func DetectFormat(name, contentType string, body []byte) string {
	byName := formatByExtension[strings.ToLower(path.Ext(nameOnly(name)))]
	if mt, _, err := mime.ParseMediaType(contentType); err == nil {
		mt = strings.ToLower(mt)
		switch {
		case mt == "text/plain" && byName != "":
			// What clients send for any text file they know no type of.
			return byName
		case formatByMediaType[mt] != "":
			return formatByMediaType[mt]
		case mt == "application/octet-stream" || mt == "binary/octet-stream":
		case strings.HasPrefix(mt, "text/"):
			return FormatText
		default:
			return ""
		}
	}
	if byName != "" {
		return byName
	}
	return sniff(body)
}

// nameOnly drops a URI's query and fragment.
func nameOnly(name string) string {
	if strings.Contains(name, "://") {
		if i := strings.IndexAny(name, "?#"); i >= 0 {
			name = name[:i]
		}
	}
	return name
}

func sniff(body []byte) string {
	switch {
	case bytes.HasPrefix(body, []byte("%PDF-")):
		return FormatPDF
	case bytes.HasPrefix(body, []byte("PK\x03\x04")):
		if isWorkbook(body) {
			return FormatXLSX
		}
		return ""
	}
	head := body[:min(len(body), 512)]
	if strings.HasPrefix(http.DetectContentType(head), "text/html") {
		return FormatHTML
	}
	if utf8.Valid(body) && !bytes.ContainsRune(head, 0) {
		return FormatText
	}
	return ""
}

// isWorkbook reports whether a zip holds an Office Open XML workbook part.
func isWorkbook(body []byte) bool {
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		return false
	}
	for _, f := range zr.File {
		if strings.EqualFold(f.Name, "xl/workbook.xml") {
			return true
		}
	}
	return false
}

// MediaType is the media type Parse reads as format: a stored body parsed again with
// it is read as the format it was written as, whatever its name.
func MediaType(format string) string {
	switch format {
	case FormatText:
		return "text/plain"
	case FormatMarkdown:
		return "text/markdown"
	case FormatHTML:
		return "text/html"
	case FormatPDF:
		return "application/pdf"
	case FormatCSV:
		return "text/csv"
	case FormatXLSX:
		return "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	}
	return ""
}
