package producer

import (
	"fmt"
	"testing"
)

// The expected values were printed by the Java client itself (kafka-clients 4.4.0,
// Utils.murmur2 and Utils.toPositive(hash) % partitions) for partition counts 1, 3, 6, 7, 12, 100.
var javaMurmur2 = []struct {
	key        string
	hash       int32
	partitions []int32
}{
	{"", 275646681, []int32{0, 0, 3, 2, 9, 81}},
	{"a", -1563381124, []int32{0, 1, 4, 5, 4, 24}},
	{"ab", 316155434, []int32{0, 2, 2, 0, 2, 34}},
	{"abc", 479470107, []int32{0, 0, 3, 4, 3, 7}},
	{"abcd", -1323649548, []int32{0, 2, 2, 5, 8, 0}},
	{"abcde", 461995741, []int32{0, 1, 1, 4, 1, 41}},
	{"kafka", -798503068, []int32{0, 1, 4, 3, 4, 80}},
	{"user-42", 1459644460, []int32{0, 1, 4, 1, 4, 60}},
	{"order:2026-11-30", -760681541, []int32{0, 0, 3, 5, 3, 7}},
	{"\u00e9t\u00e9", -2101193575, []int32{0, 1, 1, 4, 1, 73}},
	{"the quick brown fox jumps over the lazy dog", -890066680, []int32{0, 1, 4, 3, 4, 68}},
	{"21", -973932308, []int32{0, 0, 0, 3, 0, 40}},
	{"0123456789abcdef0", 1856781438, []int32{0, 0, 0, 1, 6, 38}},
}

func TestMurmur2MatchesJavaClient(t *testing.T) {
	counts := []int{1, 3, 6, 7, 12, 100}
	for _, tc := range javaMurmur2 {
		t.Run(tc.key, func(t *testing.T) {
			if got := murmur2([]byte(tc.key)); got != tc.hash {
				t.Fatalf("murmur2(%q) = %d, Java says %d", tc.key, got, tc.hash)
			}
			for i, n := range counts {
				if got := keyPartition([]byte(tc.key), n); got != tc.partitions[i] {
					t.Errorf("partition of %q over %d partitions = %d, Java says %d", tc.key, n, got, tc.partitions[i])
				}
			}
		})
	}
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	if got := murmur2(bin); got != -1948347274 {
		t.Fatalf("murmur2(0..255) = %d, Java says -1948347274", got)
	}
}

func TestToPositiveClearsSignBit(t *testing.T) {
	for _, tc := range []struct{ in, want int32 }{
		{0, 0}, {1, 1}, {-1, 0x7fffffff}, {-2147483648, 0}, {2147483647, 2147483647},
	} {
		if got := toPositive(tc.in); got != tc.want {
			t.Errorf("toPositive(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestStickyPartitionerSticksThenSwitches(t *testing.T) {
	s := newStickyPartitioner(1000)
	available := []int32{0, 1, 2, 3}
	first := s.partitionOf(s.topic("t"), 100, available, 4)
	// 1000 bytes in 100-byte records stay on one partition.
	for i := 1; i < 10; i++ {
		if p := s.partitionOf(s.topic("t"), 100, available, 4); p != first {
			t.Fatalf("record %d went to %d, want the sticky %d", i, p, first)
		}
	}
	// The next record crosses batch.size: it must move to another partition.
	if p := s.partitionOf(s.topic("t"), 100, available, 4); p == first {
		t.Fatalf("after batch.size bytes the partition stayed %d", p)
	}
	// Topics are independent; only available partitions are chosen.
	for i := 0; i < 200; i++ {
		if p := s.partitionOf(s.topic("other"), 600, []int32{2}, 4); p != 2 {
			t.Fatalf("only partition 2 is available, got %d", p)
		}
	}
}

func TestStickyPartitionerSpreadsUniformly(t *testing.T) {
	s := newStickyPartitioner(100)
	available := []int32{0, 1, 2}
	seen := map[int32]int{}
	for i := 0; i < 3000; i++ {
		seen[s.partitionOf(s.topic("t"), 100, available, 3)]++
	}
	for _, p := range available {
		if seen[p] < 500 {
			t.Fatalf("partition %d got %d of 3000 records; distribution %v is not uniform", p, seen[p], seen)
		}
	}
}

// TestAdaptiveLoadStats pins BuiltInPartitioner.updatePartitionLoadStats and nextPartition:
// queue lengths 0 3 1 invert to 4 1 3 and fold to the table 4 5 8, so draws 0-3 go to the
// first partition, 4 to the second, 5-7 to the third; equal queues with none left out, fewer
// than two partitions, or no stats: the uniform draw.
func TestAdaptiveLoadStats(t *testing.T) {
	s := newStickyPartitioner(16384)
	st := s.topic("t")
	s.updateLoadStats("t", []int32{0, 3, 1}, []int32{10, 11, 12}, 3)
	ls := st.load.Load()
	if ls == nil || fmt.Sprint(ls.cft) != "[4 5 8]" || fmt.Sprint(ls.ids) != "[10 11 12]" {
		t.Fatalf("load stats %+v, want cft [4 5 8] for ids [10 11 12]", ls)
	}
	var got []int32
	for r := range int32(8) {
		got = append(got, ls.draw(r+8)) // modulo the total
	}
	if fmt.Sprint(got) != "[10 10 10 10 11 12 12 12]" {
		t.Fatalf("draws 0..7 went to %v", got)
	}
	for _, tc := range []struct {
		name   string
		sizes  []int32
		length int
	}{
		{"equal queues", []int32{2, 2, 2}, 3},
		{"one partition", []int32{5}, 1},
		{"no stats", nil, 0},
		{"every partition left out", []int32{0, 0}, 0},
	} {
		s.updateLoadStats("t", []int32{0, 3, 1}, []int32{10, 11, 12}, 3)
		s.updateLoadStats("t", tc.sizes, []int32{10, 11, 12}[:len(tc.sizes)], tc.length)
		if ls := st.load.Load(); ls != nil {
			t.Errorf("%s: load stats %+v, want none (uniform)", tc.name, ls)
		}
	}
	// Equal queues but a partition left out (unavailable): still weighted, over the others.
	s.updateLoadStats("t", []int32{1, 1, 0}, []int32{10, 12, -1}, 2)
	if ls := st.load.Load(); ls == nil || fmt.Sprint(ls.ids) != "[10 12]" {
		t.Fatalf("with a partition left out: %+v, want a draw over 10 and 12", ls)
	}
}

// TestAdaptiveDrawAvoidsTheLongQueue: with one partition's queue ten batches long and the
// other's empty, the sticky switches go to the short one 11 times in 12.
func TestAdaptiveDrawAvoidsTheLongQueue(t *testing.T) {
	s := newStickyPartitioner(100)
	st := s.topic("t")
	s.updateLoadStats("t", []int32{0, 10}, []int32{0, 1}, 2)
	counts := map[int32]int{}
	for range 12000 {
		counts[s.partitionOf(st, 100, []int32{0, 1}, 2)]++ // every record fills batch.size: a switch each
	}
	if share := float64(counts[1]) / 12000; share < 0.06 || share > 0.11 {
		t.Fatalf("the long queue's partition took %.3f of the records, want about 1/12 (%v)", share, counts)
	}
}
