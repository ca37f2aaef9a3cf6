package extraction

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestRegisterStepRefusesBadNames(t *testing.T) {
	keep := func(_ context.Context, in StepInput) ([]string, error) { return make([]string, len(in.Facts)), nil }
	var s Steps
	if err := s.Register("acme.drop_prices", keep); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"loom.mine", "acme.drop_prices", "", "Has Space"} {
		if err := s.Register(bad, keep); err == nil {
			t.Errorf("Register(%q) accepted", bad)
		}
	}
	if err := s.Register("acme.nil", nil); err == nil {
		t.Error("a nil step registered")
	}
}

func TestRegisteredStepsAreNamedNotDefault(t *testing.T) {
	var s Steps
	_ = s.Register("acme.drop_prices", func(_ context.Context, in StepInput) ([]string, error) { return make([]string, len(in.Facts)), nil })
	if got, err := resolveSteps(nil, nil, &s); err != nil || slices.Contains(got, "acme.drop_prices") {
		t.Errorf("the default pipeline: %v, %v", got, err)
	}
	order := []string{stepExtract, "acme.drop_prices", stepBulkWrite}
	if got, err := resolveSteps(order, nil, &s); err != nil || !slices.Equal(got, order) {
		t.Errorf("a pipeline naming it: %v, %v", got, err)
	}
	if _, err := resolveSteps(order, nil, nil); err == nil {
		t.Error("a step no operator registered was accepted")
	}
	_, err := resolveSteps([]string{stepExtract, "acme.nope"}, nil, &s)
	if err == nil || !strings.Contains(err.Error(), "acme.drop_prices") {
		t.Errorf("an unknown step's refusal names the registered ones: %v", err)
	}
}
