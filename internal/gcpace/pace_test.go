package gcpace

import "testing"

func TestPercentForLetsASmallHeapGrowToTheFloorAndABigOneAtGosPace(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{live: 32 * mib, floor: 256 * mib, want: 700}, // the next collection at 256 MiB
		{live: 128 * mib, floor: 256 * mib, want: 100},
		{live: 1024 * mib, floor: 256 * mib, want: 100}, // past the floor: Go's own pace
		{live: 0, floor: 256 * mib, want: 25500},        // an empty heap counts as 1 MiB
	} {
		if got := PercentFor(c.live, c.floor); got != c.want {
			t.Errorf("PercentFor(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.floor/mib, got, c.want)
		}
	}
}
