package parse

import (
	"archive/zip"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/xuri/excelize/v2"
)

// rowSeparator joins a row's cells into its block's text.
const rowSeparator = " | "

// addTable appends a table (the first row its header) and a row block per data row.
// Columns are the header's cells, an empty one named "column N" and a repeated one
// suffixed " (2)", " (3)"…, so a dataset's schema names each column once; every row
// is cut or padded to the header's width, a row wider than the header widening it.
// The table is named name, or "table N" when name is empty, made unique within
// the document.
func (p *parser) addTable(doc *Document, path []string, name string, header []string, rows [][]string) error {
	width := len(header)
	for _, r := range rows {
		width = max(width, len(r))
	}
	if width == 0 {
		return nil
	}
	t := Table{Name: uniqueTableName(doc, name), Columns: columnNames(header, width), Rows: make([][]string, 0, len(rows))}
	index := len(doc.Tables)
	doc.Tables = append(doc.Tables, t)
	rowPath := append([]string(nil), path...)
	if len(path) == 0 || path[len(path)-1] != t.Name {
		rowPath = append(rowPath, t.Name) // a table named after its heading is not named twice
	}
	for _, r := range rows {
		if len(r) < width {
			r = append(r, make([]string, width-len(r))...)
		}
		if err := p.spend(int64(16 * width)); err != nil {
			return err
		}
		doc.Tables[index].Rows = append(doc.Tables[index].Rows, r)
		if err := p.add(doc, Block{Kind: KindRow, Level: index + 1, HeadingPath: rowPath, Text: strings.Join(r, rowSeparator)}); err != nil {
			return err
		}
	}
	return nil
}

func columnNames(header []string, width int) []string {
	cols := make([]string, width)
	seen := map[string]int{}
	for i := range cols {
		name := ""
		if i < len(header) {
			name = strings.TrimSpace(header[i])
		}
		if name == "" {
			name = fmt.Sprintf("column %d", i+1)
		}
		base := name
		for seen[name] > 0 {
			seen[base]++
			name = fmt.Sprintf("%s (%d)", base, seen[base])
		}
		seen[name]++
		cols[i] = name
	}
	return cols
}

func uniqueTableName(doc *Document, name string) string {
	name = strings.TrimSpace(name)
	if name == "" {
		name = fmt.Sprintf("table %d", len(doc.Tables)+1)
	}
	taken := func(n string) bool {
		for _, t := range doc.Tables {
			if t.Name == n {
				return true
			}
		}
		return false
	}
	candidate := name
	for i := 2; taken(candidate); i++ {
		candidate = fmt.Sprintf("%s (%d)", name, i)
	}
	return candidate
}

// csv reads a CSV (encoding/csv, strict quoting) as one table named after the
// document, its first record the header. The delimiter is a comma, or a semicolon or
// tab when the first line has more of those than commas.
func (p *parser) csv(name string, body []byte) (*Document, error) {
	s, err := textBody(FormatCSV, body)
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(strings.NewReader(s))
	r.Comma = csvDelimiter(s)
	r.FieldsPerRecord = -1
	var header []string
	var rows [][]string
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, malformed("the CSV could not be read: %v", err)
		}
		if err := p.tick(); err != nil {
			return nil, err
		}
		if header == nil {
			header = rec
			continue
		}
		rows = append(rows, rec)
	}
	doc := &Document{}
	if err := p.addTable(doc, nil, titleFromName(name), header, rows); err != nil {
		return nil, err
	}
	return doc, nil
}

func csvDelimiter(s string) rune {
	line := s
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		line = s[:i]
	}
	best, count := ',', strings.Count(line, ",")
	for _, d := range []rune{';', '\t'} {
		if n := strings.Count(line, string(d)); n > count {
			best, count = d, n
		}
	}
	return best
}

// xlsx reads each sheet of a workbook (excelize) as a table named after the sheet,
// its first non-empty row the header; empty rows are skipped. The zip's declared
// sizes are summed against MaxExpandedBytes before anything is inflated, and
// archive/zip refuses an entry that inflates past its declared size, so a zip bomb
// is refused without being expanded.
func (p *parser) xlsx(body []byte) (*Document, error) {
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		return nil, malformed("the XLSX is not a zip archive: %v", err)
	}
	var expanded uint64
	for _, f := range zr.File {
		expanded += f.UncompressedSize64
		if expanded > uint64(p.lim.MaxExpandedBytes) {
			return nil, tooLarge("the XLSX expands past the limit of %d bytes", p.lim.MaxExpandedBytes)
		}
	}
	// Every part stays in memory (UnzipXMLSizeLimit = UnzipSizeLimit): no temporary
	// files, and the sum above bounds it.
	f, err := excelize.OpenReader(bytes.NewReader(body), excelize.Options{
		UnzipSizeLimit: p.lim.MaxExpandedBytes, UnzipXMLSizeLimit: p.lim.MaxExpandedBytes,
	})
	if err != nil {
		return nil, malformed("the XLSX could not be read: %v", err)
	}
	defer f.Close()
	doc := &Document{}
	if props, err := f.GetDocProps(); err == nil && props != nil {
		doc.Title = strings.TrimSpace(props.Title)
	}
	for _, sheet := range f.GetSheetList() {
		if err := p.sheet(doc, f, sheet); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

func (p *parser) sheet(doc *Document, f *excelize.File, sheet string) error {
	rows, err := f.Rows(sheet)
	if err != nil {
		return malformed("the XLSX sheet %q could not be read: %v", sheet, err)
	}
	defer rows.Close()
	var header []string
	var data [][]string
	for rows.Next() {
		if err := p.tick(); err != nil {
			return err
		}
		cells, err := rows.Columns()
		if err != nil {
			return malformed("the XLSX sheet %q could not be read: %v", sheet, err)
		}
		// A row's cells cost their slots as well as their text: a sheet of rows
		// each with a far-right cell is small in the zip and wide in memory.
		if err := p.spend(int64(16 * len(cells))); err != nil {
			return err
		}
		if allEmpty(cells) {
			continue
		}
		if header == nil {
			header = cells
			continue
		}
		data = append(data, cells)
	}
	if err := rows.Error(); err != nil {
		return malformed("the XLSX sheet %q could not be read: %v", sheet, err)
	}
	return p.addTable(doc, nil, sheet, header, data)
}

func allEmpty(cells []string) bool {
	for _, c := range cells {
		if strings.TrimSpace(c) != "" {
			return false
		}
	}
	return true
}
