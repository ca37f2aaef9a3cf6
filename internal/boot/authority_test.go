package boot

import (
	"strings"
	"testing"
)

// The refusals of the recorded authority, case by case; tests/boot drives the same
// rules through real stores.
func TestPlanAuthority(t *testing.T) {
	const a, b = "deployment-a", "deployment-b"
	both := recorded{pgID: a, chFound: true, chAuthority: postgresAuthority, chID: a}
	for _, c := range []struct {
		name       string
		configured string
		rec        recorded
		record     bool
		refusal    string // "" = allowed
		want       authorityPlan
	}{
		{name: "first boot records a new id in both", record: true, want: authorityPlan{writePG: true, writeCH: true}},
		{name: "first boot records the configured id", configured: a, record: true, want: authorityPlan{id: a, writePG: true, writeCH: true}},
		{name: "both agree", rec: both, want: authorityPlan{id: a}},
		{name: "both agree with the configured id", configured: a, rec: both, record: true, want: authorityPlan{id: a}},
		{name: "a new ClickHouse joins the deployment", rec: recorded{pgID: a}, record: true, want: authorityPlan{id: a, writeCH: true}},
		{name: "an unmigrated ClickHouse is served without migrating", rec: recorded{pgID: a}, want: authorityPlan{id: a}},
		{name: "nothing recorded and no migrating", refusal: "records no deployment yet"},
		{name: "Postgres of another deployment", rec: recorded{pgID: b, chFound: true, chAuthority: postgresAuthority, chID: a}, record: true, refusal: "different deployments"},
		{name: "a fresh Postgres under a recorded ClickHouse", rec: recorded{chFound: true, chAuthority: postgresAuthority, chID: a}, record: true, refusal: "records no deployment while ClickHouse records deployment " + a},
		{name: "configured for another deployment", configured: b, rec: both, refusal: "LOOM_DEPLOYMENT_ID is " + b},
		{name: "ClickHouse records the ClickHouse authority", rec: recorded{pgID: a, chFound: true, chAuthority: "clickhouse", chID: a}, refusal: "ClickHouse records the \"clickhouse\" memory authority"},
	} {
		got, err := planAuthority(c.configured, c.rec, c.record)
		if c.refusal != "" {
			if err == nil || !strings.Contains(err.Error(), c.refusal) {
				t.Errorf("%s: %v, want a refusal saying %q", c.name, err, c.refusal)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: refused: %v", c.name, err)
			continue
		}
		if c.want.id == "" && got.id == "" {
			t.Errorf("%s: no deployment id", c.name)
		}
		if c.want.id != "" && got.id != c.want.id || got.writePG != c.want.writePG || got.writeCH != c.want.writeCH {
			t.Errorf("%s: plan %+v, want %+v", c.name, got, c.want)
		}
	}
}
