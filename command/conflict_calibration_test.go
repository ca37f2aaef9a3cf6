package command

import (
	"testing"

	"github.com/loomplane/loom/internal/config"
)

// A namespace whose background sits at the baseline keeps the scalar thresholds; one
// whose rows look alike (a higher median) gets closer ones, one whose rows are far
// apart less close ones, each bounded by the max shift and by 1, the duplicate
// threshold never below the conflict one.
func TestCalibratedThresholdsFollowTheNamespacesBackground(t *testing.T) {
	c := config.ConflictCalibration{Enabled: true, Baseline: 0.1, MaxShift: 0.05}
	at := func(median float64) judgingCalibration {
		jc, ok := calibratedThresholds([][2]float64{{median, 0.02}, {median - 0.01, 0.02}, {median + 0.01, 0.02}}, 0.8, 0.92, c)
		if !ok {
			t.Fatal("no thresholds from three backgrounds")
		}
		return jc
	}
	if jc := at(0.1); jc.conflict != 0.8 || jc.duplicate != 0.92 {
		t.Fatalf("at the baseline: %+v; want the scalars", jc)
	}
	// (0.2 - 0.1) * (1 - 0.8) / 0.9 = 0.0222; (0.2 - 0.1) * 0.08 / 0.9 = 0.0089.
	if jc := at(0.2); jc.conflict != 0.8222 || jc.duplicate != 0.9289 {
		t.Fatalf("median 0.2: %+v; want 0.8222 and 0.9289", jc)
	}
	if jc := at(0.7); jc.conflict != 0.85 || jc.duplicate != 0.97 {
		t.Fatalf("median 0.7: %+v; want both moved by the max shift", jc)
	}
	if jc := at(-0.5); jc.conflict != 0.75 || jc.duplicate != 0.87 {
		t.Fatalf("median -0.5: %+v; want both lowered by the max shift", jc)
	}
	if _, ok := calibratedThresholds(nil, 0.8, 0.92, c); ok {
		t.Fatal("thresholds from no background")
	}
	c.MaxShift = 0.5
	if jc, _ := calibratedThresholds([][2]float64{{0.99, 0}}, 0.8, 0.999, c); jc.conflict > 1 || jc.duplicate > 1 || jc.duplicate < jc.conflict {
		t.Fatalf("bounds: %+v", jc)
	}
}
