package producer

import (
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
