// Package parsetest makes the hostile documents that knowledge/parse's tests and the
// end-to-end tests send: a fixture, for tests only.
package parsetest

import (
	"archive/zip"
	"bytes"
	"io"
	"testing"
)

// ZipBombXLSX is a workbook's zip whose one worksheet inflates to size bytes of spaces
// from about a thousandth of that.
func ZipBombXLSX(t testing.TB, size int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, part := range []struct{ name, body string }{
		{"[Content_Types].xml", `<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"></Types>`},
		{"xl/workbook.xml", `<?xml version="1.0"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheets><sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>`},
	} {
		w, err := zw.Create(part.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, part.body); err != nil {
			t.Fatal(err)
		}
	}
	w, err := zw.Create("xl/worksheets/sheet1.xml")
	if err != nil {
		t.Fatal(err)
	}
	spaces := bytes.Repeat([]byte(" "), 1<<20)
	for written := int64(0); written < size; written += int64(len(spaces)) {
		if _, err := w.Write(spaces); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
