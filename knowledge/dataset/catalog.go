package dataset

import (
	"fmt"

	"github.com/loomplane/loom/knowledge/parse"
)

// Dataset is a table of a document version offered as a dataset: its id (table-N,
// N its place among the document's tables), its name, its rows and the schema Infer
// proposes for it.
type Dataset struct {
	ID     string `json:"dataset_id"`
	Name   string `json:"name"`
	Rows   int    `json:"rows"`
	Schema Schema `json:"schema"`
}

// Of lists a parsed document's tables as datasets, in document order.
func Of(doc *parse.Document) []Dataset {
	out := make([]Dataset, len(doc.Tables))
	for i, t := range doc.Tables {
		out[i] = Dataset{ID: id(i), Name: t.Name, Rows: len(t.Rows), Schema: Infer(t)}
	}
	return out
}

// Find returns the table a dataset id names in doc.
func Find(doc *parse.Document, datasetID string) (parse.Table, bool) {
	for i, t := range doc.Tables {
		if id(i) == datasetID {
			return t, true
		}
	}
	return parse.Table{}, false
}

func id(i int) string { return fmt.Sprintf("table-%d", i+1) }
