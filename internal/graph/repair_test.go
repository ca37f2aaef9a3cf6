package graph

import (
	"math/rand"
	"testing"
	"time"
)

var day0 = time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC)

// obsAt is an observation of (user, lives_in, object) starting at from and seen at seen.
func obsAt(object string, seq uint64, from, seen time.Time, statedTo *time.Time) *Observation {
	return &Observation{ObsKey: ObsKey{Fact{"user", "lives_in", object}, seq}, Cardinality: "single",
		ValidFrom: from, ValidTo: statedTo, StatedTo: statedTo, SeenUS: seen.UnixMicro()}
}

func TestRepairNewerValueClosesTheOlderWhenItStarts(t *testing.T) {
	london := obsAt("london", 1, day0.Add(9*time.Hour), day0.Add(9*time.Hour), nil)
	paris := obsAt("paris", 2, day0.Add(24*time.Hour+10*time.Hour), day0.Add(34*time.Hour), nil)
	closes := Repair([]*Observation{paris, london})
	if len(closes) != 1 || !closes[london.ObsKey].Equal(paris.ValidFrom) {
		t.Fatalf("closes %v: London must close when Paris starts, and Paris stay", closes)
	}
}

func TestRepairDatedBerlinBeforeUndatedParis(t *testing.T) {
	dec1 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	berlin := obsAt("berlin", 1, dec1, day0.Add(time.Hour), nil)                    // written first, from Dec 1
	paris := obsAt("paris", 2, day0.Add(20*time.Hour), day0.Add(20*time.Hour), nil) // undated, later that day
	closes := Repair([]*Observation{berlin, paris})
	if len(closes) != 1 || !closes[paris.ObsKey].Equal(dec1) {
		t.Fatalf("closes %v: Paris holds until Berlin begins on Dec 1, Berlin stays", closes)
	}
}

func TestRepairValueWithItsOwnEndStaysBesideANewerOne(t *testing.T) {
	dec := time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC)
	london := obsAt("london", 1, day0, day0, &dec)
	paris := obsAt("paris", 2, day0.Add(48*time.Hour), day0.Add(48*time.Hour), nil)
	if closes := Repair([]*Observation{london, paris}); len(closes) != 0 {
		t.Fatalf("closes %v: London until December stays open beside Paris", closes)
	}
	// An older value stated with an end is newer than nothing: Paris, older, would close.
	berlin := obsAt("berlin", 3, day0.Add(72*time.Hour), day0.Add(72*time.Hour), &dec)
	closes := Repair([]*Observation{london, paris, berlin})
	if len(closes) != 1 || !closes[paris.ObsKey].Equal(berlin.ValidFrom) {
		t.Fatalf("closes %v: the open-ended Paris closes when the newer Berlin starts", closes)
	}
}

func TestRepairOnOneDayTheLaterArrivalIsNewer(t *testing.T) {
	dated := obsAt("rome", 1, day0, day0.Add(15*time.Hour), nil)                     // dated to the day, seen at 15:00
	undated := obsAt("oslo", 2, day0.Add(11*time.Hour), day0.Add(11*time.Hour), nil) // seen at 11:00
	if closes := Repair([]*Observation{dated, undated}); len(closes) != 1 || !closes[undated.ObsKey].Equal(dated.ValidFrom.Add(11*time.Hour)) {
		// Oslo closes when Rome starts, never before it started itself.
		t.Fatalf("closes %v: the later arrival (Rome) stays; Oslo closes", closes)
	}
}

// Whatever the observations, the newest value is never closed, and a closed
// observation never ends before it started.
func TestRepairNeverClosesEveryValue(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	objects := []string{"a", "b", "c", "d"}
	for round := 0; round < 2000; round++ {
		var obs []*Observation
		for i := 0; i < 1+rng.Intn(6); i++ {
			from := day0.Add(time.Duration(rng.Intn(96)) * time.Hour)
			seen := day0.Add(time.Duration(rng.Intn(96*3600)) * time.Second)
			var to *time.Time
			if rng.Intn(4) == 0 {
				e := from.Add(time.Duration(1+rng.Intn(48)) * time.Hour)
				to = &e
			}
			obs = append(obs, obsAt(objects[rng.Intn(len(objects))], uint64(i+1), from, seen, to))
		}
		closes := Repair(obs)
		open := 0
		for _, o := range obs {
			end, closed := closes[o.ObsKey]
			if !closed {
				open++
				continue
			}
			if end.Before(o.ValidFrom) || o.StatedTo != nil {
				t.Fatalf("round %d: %+v closed at %v", round, o, end)
			}
		}
		if open == 0 {
			t.Fatalf("round %d: every observation closed", round)
		}
	}
}
