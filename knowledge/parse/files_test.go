package parse_test

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"fmt"
	"hash/crc32"
	"io"
	"testing"

	"codeberg.org/go-pdf/fpdf"
	"github.com/xuri/excelize/v2"
)

// The documents the tests parse, made by the tests: a PDF written with fpdf, a
// workbook with excelize, zips by hand.

// makePDF writes a PDF with a title and one page per entry of pages, each page's
// lines written one under the other.
func makePDF(t testing.TB, title string, pages ...[]string) []byte {
	t.Helper()
	pdf := fpdf.New("P", "mm", "A4", "")
	pdf.SetTitle(title, true)
	pdf.SetFont("Helvetica", "", 11)
	for _, lines := range pages {
		pdf.AddPage()
		for _, l := range lines {
			pdf.Cell(0, 6, l)
			pdf.Ln(6)
		}
	}
	var buf bytes.Buffer
	if err := pdf.Output(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// makeXLSX writes a workbook with a sheet per entry, in order, each row from A1 down.
func makeXLSX(t testing.TB, sheets []string, rows map[string][][]any) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	for i, name := range sheets {
		if i == 0 {
			if err := f.SetSheetName("Sheet1", name); err != nil {
				t.Fatal(err)
			}
		} else if _, err := f.NewSheet(name); err != nil {
			t.Fatal(err)
		}
		for r, row := range rows[name] {
			cell, _ := excelize.CoordinatesToCellName(1, r+1)
			if err := f.SetSheetRow(name, cell, &row); err != nil {
				t.Fatal(err)
			}
		}
	}
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// lyingXLSX is a real workbook with its worksheet's entry stored again under a
// header that declares 10 bytes for what inflates to size: the declared sizes pass
// the sum, and the inflation is what must stop it.
func lyingXLSX(t testing.TB, size int) []byte {
	t.Helper()
	good := makeXLSX(t, []string{"S"}, map[string][][]any{"S": {{"a"}, {"1"}}})
	zr, err := zip.NewReader(bytes.NewReader(good), int64(len(good)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		if f.Name == "xl/worksheets/sheet1.xml" {
			continue
		}
		if err := zw.Copy(f); err != nil {
			t.Fatal(err)
		}
	}
	payload := append([]byte(`<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>`),
		bytes.Repeat([]byte(" "), size)...)
	var deflated bytes.Buffer
	dw := newDeflater(&deflated)
	dw.Write(payload)
	dw.Close()
	w, err := zw.CreateRaw(&zip.FileHeader{
		Name: "xl/worksheets/sheet1.xml", Method: zip.Deflate,
		CRC32: crc32.ChecksumIEEE(payload), CompressedSize64: uint64(deflated.Len()), UncompressedSize64: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(deflated.Bytes())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func words(n int, prefix string) string {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s%d", prefix, i)
	}
	return b.String()
}

func newDeflater(w io.Writer) io.WriteCloser {
	fw, err := flate.NewWriter(w, flate.BestSpeed)
	if err != nil {
		panic(err)
	}
	return fw
}
