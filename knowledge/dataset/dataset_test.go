package dataset_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/loomplane/loom/knowledge/dataset"
	"github.com/loomplane/loom/knowledge/parse"
)

const injection = `'; DROP TABLE loom.knowledge_datasets; --`

// orders is the table the query tests read, as a CSV upload gives it.
func orders(t *testing.T) parse.Table {
	t.Helper()
	csv := "id,city,qty,price,day,note\n" +
		"1,Oslo,3,2.5,2024-01-02,first\n" +
		"2,Bergen,1,10,2024-01-03,\n" +
		"3,Oslo,5,1.25,2024-02-01,\"" + injection + "\"\n" +
		"4,,2,4,2024-02-15,50% off\n" +
		"5,Bergen,7,,2024-03-01,\"a, b\"\n" +
		"6,Oslo ,4,3,2024-03-05,Oslo\n"
	doc, err := parse.Parse(context.Background(), "orders.csv", "", []byte(csv), parse.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return doc.Tables[0]
}

func TestInferTypesFromTheRows(t *testing.T) {
	got := dataset.Infer(orders(t))
	want := dataset.Schema{Columns: []dataset.Column{
		{"id", "int"}, {"city", "string"}, {"qty", "int"}, {"price", "float"}, {"day", "date"}, {"note", "string"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Infer = %v, want %v", got, want)
	}
	mixed := parse.Table{Columns: []string{"a", "b", "c"}, Rows: [][]string{{"1", "NaN", ""}, {"1e3", "1,000", ""}}}
	if got := dataset.Infer(mixed); got.Columns[0].Type != "float" || got.Columns[1].Type != "string" || got.Columns[2].Type != "string" {
		t.Errorf("Infer(mixed) = %v, want float, string, string", got)
	}
}

func TestQueries(t *testing.T) {
	tbl := orders(t)
	schema := dataset.Infer(tbl)
	cases := []struct {
		name, query string
		columns     []string
		rows        [][]any
		truncated   bool
	}{
		{"eq on a string, every column", `{"filters":[{"column":"city","op":"eq","value":"Bergen"}]}`,
			[]string{"id", "city", "qty", "price", "day", "note"},
			[][]any{{int64(2), "Bergen", int64(1), float64(10), "2024-01-03", nil}, {int64(5), "Bergen", int64(7), nil, "2024-03-01", "a, b"}}, false},
		{"numbers compare as numbers", `{"filters":[{"column":"qty","op":"ge","value":4},{"column":"price","op":"lt","value":3.5}],"order_by":[{"column":"id"}]}`,
			[]string{"id", "city", "qty", "price", "day", "note"},
			[][]any{{int64(3), "Oslo", int64(5), 1.25, "2024-02-01", injection}, {int64(6), "Oslo ", int64(4), float64(3), "2024-03-05", "Oslo"}}, false},
		{"dates compare as dates", `{"filters":[{"column":"day","op":"gt","value":"2024-02-01"}],"group_by":[],"aggregates":[{"fn":"count"}]}`,
			[]string{"count"}, [][]any{{int64(3)}}, false},
		{"group, sum, avg, order by an aggregate", `{"group_by":["city"],"aggregates":[{"fn":"count"},{"fn":"sum","column":"qty"},{"fn":"avg","column":"price"}],"order_by":[{"column":"sum(qty)","desc":true}]}`,
			[]string{"city", "count", "sum(qty)", "avg(price)"},
			[][]any{{"Oslo", int64(2), int64(8), 1.875}, {"Bergen", int64(2), int64(8), float64(10)}, {"Oslo ", int64(1), int64(4), float64(3)}, {nil, int64(1), int64(2), float64(4)}}, false},
		{"min and max of a date, count of a column skips nulls", `{"aggregates":[{"fn":"min","column":"day"},{"fn":"max","column":"day"},{"fn":"count","column":"note"}]}`,
			[]string{"min(day)", "max(day)", "count(note)"}, [][]any{{"2024-01-02", "2024-03-05", int64(5)}}, false},
		{"in", `{"filters":[{"column":"id","op":"in","value":[1,6,99]}],"group_by":["id"]}`,
			[]string{"id"}, [][]any{{int64(1)}, {int64(6)}}, false},
		{"an injection string is a literal value", `{"filters":[{"column":"note","op":"eq","value":"` + injection + `"}],"group_by":["id"]}`,
			[]string{"id"}, [][]any{{int64(3)}}, false},
		{"an injection string matches nothing it does not equal", `{"filters":[{"column":"city","op":"eq","value":"Oslo' OR '1'='1"}],"aggregates":[{"fn":"count"}]}`,
			[]string{"count"}, [][]any{{int64(0)}}, false},
		{"contains is a literal, case-sensitive substring", `{"filters":[{"column":"note","op":"contains","value":"%"}],"group_by":["id"]}`,
			[]string{"id"}, [][]any{{int64(4)}}, false},
		{"contains a SQL comment", `{"filters":[{"column":"note","op":"contains","value":"; --"}],"group_by":["id"]}`,
			[]string{"id"}, [][]any{{int64(3)}}, false},
		{"ne skips nulls", `{"filters":[{"column":"city","op":"ne","value":"Oslo"}],"group_by":["city"],"order_by":[{"column":"city"}]}`,
			[]string{"city"}, [][]any{{"Bergen"}, {"Oslo "}}, false},
		{"limit truncates after ordering", `{"group_by":["id"],"order_by":[{"column":"id","desc":true}],"limit":2}`,
			[]string{"id"}, [][]any{{int64(6)}, {int64(5)}}, true},
		{"nulls sort last either way", `{"group_by":["price"],"order_by":[{"column":"price","desc":true}],"limit":3}`,
			[]string{"price"}, [][]any{{float64(10)}, {float64(4)}, {float64(3)}}, true},
	}
	for _, c := range cases {
		q, err := dataset.ParseQuery([]byte(c.query))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		res, err := dataset.Evaluate(context.Background(), tbl, schema, q, dataset.DefaultLimits())
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(res.Columns, c.columns) || !reflect.DeepEqual(res.Rows, c.rows) || res.Truncated != c.truncated {
			t.Errorf("%s:\n got %v %v truncated %v\nwant %v %v truncated %v", c.name, res.Columns, res.Rows, res.Truncated, c.columns, c.rows, c.truncated)
		}
	}
}

func TestRefusedQueriesNameTheirField(t *testing.T) {
	tbl := orders(t)
	schema := dataset.Infer(tbl)
	many := `{"filters":[{"column":"id","op":"in","value":[` + fmt.Sprint(1)
	for i := 0; i < 1000; i++ {
		many += ",1"
	}
	many += `]}]}`
	cases := []struct{ name, query, field string }{
		{"an unknown column", `{"filters":[{"column":"city; DROP TABLE x","op":"eq","value":"a"}]}`, "filters[0].column"},
		{"an unknown op", `{"filters":[{"column":"city","op":"eq","value":"a"},{"column":"city","op":"like","value":"%"}]}`, "filters[1].op"},
		{"a string for a number", `{"filters":[{"column":"qty","op":"gt","value":"1 OR 1=1"}]}`, "filters[0].value"},
		{"a number for a string", `{"filters":[{"column":"city","op":"eq","value":1}]}`, "filters[0].value"},
		{"a date that is not one", `{"filters":[{"column":"day","op":"lt","value":"yesterday"}]}`, "filters[0].value"},
		{"a missing value", `{"filters":[{"column":"city","op":"eq"}]}`, "filters[0].value"},
		{"contains on a number", `{"filters":[{"column":"qty","op":"contains","value":"1"}]}`, "filters[0].op"},
		{"in without a list", `{"filters":[{"column":"id","op":"in","value":1}]}`, "filters[0].value"},
		{"in with a wrong value", `{"filters":[{"column":"id","op":"in","value":[1,"x"]}]}`, "filters[0].value[1]"},
		{"in with too many values", many, "filters[0].value"},
		{"an unknown group column", `{"group_by":["city","nope"]}`, "group_by[1]"},
		{"an unknown aggregate", `{"aggregates":[{"fn":"median","column":"qty"}]}`, "aggregates[0].fn"},
		{"sum of a string", `{"aggregates":[{"fn":"sum","column":"city"}]}`, "aggregates[0].fn"},
		{"an aggregate of an unknown column", `{"aggregates":[{"fn":"max","column":"nope"}]}`, "aggregates[0].column"},
		{"order by a column not in the answer", `{"group_by":["city"],"order_by":[{"column":"qty"}]}`, "order_by[0].column"},
		{"a limit over the most", `{"limit":1001}`, "limit"},
		{"a negative limit", `{"limit":-1}`, "limit"},
		{"an unknown field", `{"filters":[],"sql":"SELECT 1"}`, "sql"},
		{"a wrong field type", `{"limit":"10"}`, "limit"},
		{"trailing data", `{"limit":1} {"limit":2}`, "query"},
	}
	for _, c := range cases {
		q, err := dataset.ParseQuery([]byte(c.query))
		if err == nil {
			_, err = dataset.Evaluate(context.Background(), tbl, schema, q, dataset.DefaultLimits())
		}
		var qe *dataset.QueryError
		if !errors.As(err, &qe) || qe.Field != c.field {
			t.Errorf("%s: %v, want a QueryError on %s", c.name, err, c.field)
		}
	}
}

func TestLimitsOnGroupsAndRows(t *testing.T) {
	tbl := parse.Table{Columns: []string{"n"}}
	for i := 0; i < 50; i++ {
		tbl.Rows = append(tbl.Rows, []string{fmt.Sprint(i)})
	}
	schema := dataset.Infer(tbl)
	lim := dataset.Limits{MaxRows: 10, MaxGroups: 20}
	q, _ := dataset.ParseQuery([]byte(`{"group_by":["n"]}`))
	var qe *dataset.QueryError
	if _, err := dataset.Evaluate(context.Background(), tbl, schema, q, lim); !errors.As(err, &qe) || qe.Field != "group_by" {
		t.Errorf("50 groups over a limit of 20: %v", err)
	}
	q, _ = dataset.ParseQuery([]byte(`{}`))
	res, err := dataset.Evaluate(context.Background(), tbl, schema, q, lim)
	if err != nil || len(res.Rows) != 10 || !res.Truncated {
		t.Errorf("rows under a limit of 10: %v, %+v", err, res)
	}
	// A schema naming a column the table lacks is refused, not read.
	bad := dataset.Schema{Columns: []dataset.Column{{Name: "missing", Type: "int"}}}
	if _, err := dataset.Evaluate(context.Background(), tbl, bad, q, lim); !errors.As(err, &qe) || qe.Field != "schema.columns[0].name" {
		t.Errorf("a schema naming a missing column: %v", err)
	}
}

func TestResultIsJSON(t *testing.T) {
	tbl := orders(t)
	q, _ := dataset.ParseQuery([]byte(`{"filters":[{"column":"id","op":"eq","value":3}]}`))
	res, err := dataset.Evaluate(context.Background(), tbl, dataset.Infer(tbl), q, dataset.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	want := `{"columns":["id","city","qty","price","day","note"],"rows":[[3,"Oslo",5,1.25,"2024-02-01","` + injection + `"]],"truncated":false}`
	if string(b) != want {
		t.Errorf("JSON %s\nwant %s", b, want)
	}
}
