package tableset

import (
	"reflect"
	"testing"
)

func TestAlignAddsWhatTheCopyLacksInTheServingOrder(t *testing.T) {
	serving := []Column{
		{Name: "org", Type: "String"},
		{Name: "subject_commitment", Type: "String", DefaultKind: "DEFAULT", DefaultExpr: "''"},
		{Name: "subject_salt", Type: "String", DefaultKind: "DEFAULT", DefaultExpr: "''"},
		{Name: "detail", Type: "String"},
		{Name: "chain_format", Type: "UInt8", DefaultKind: "DEFAULT", DefaultExpr: "1"},
	}
	have := []Column{{Name: "org", Type: "String"}, {Name: "detail", Type: "String"}}
	got := AlignStatements("loom.audit_log__g4", serving, have)
	want := []string{
		"ALTER TABLE loom.audit_log__g4 ADD COLUMN `subject_commitment` String DEFAULT '' AFTER `org`",
		"ALTER TABLE loom.audit_log__g4 ADD COLUMN `subject_salt` String DEFAULT '' AFTER `subject_commitment`",
		"ALTER TABLE loom.audit_log__g4 ADD COLUMN `chain_format` UInt8 DEFAULT 1 AFTER `detail`",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("statements:\n%q\nwant\n%q", got, want)
	}
	if again := AlignStatements("loom.audit_log__g4", serving, serving); len(again) != 0 {
		t.Fatalf("a copy with every column gets %q", again)
	}
}
