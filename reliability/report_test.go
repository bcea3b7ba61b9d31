package reliability

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// row is one line of the table. Counts are lines (records for the 50 MB line's pieces are
// counted as that one line); -1 prints as "-" (does not apply).
type row struct {
	order     int
	Scenario  string
	Sent      int64
	Delivered int64
	Lost      int64
	Dup       int64
	Recovery  string
	verdict
}

// verdict is what a report row says of its scenario: whether it passed, and the notes on it.
type verdict struct {
	Result string
	Pass   bool
}

// note adds a note to the row's result, after the notes before it.
func (v *verdict) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if v.Result == "" {
		v.Result = s
	} else {
		v.Result += "; " + s
	}
}

// cell renders the verdict as a Markdown table cell: PASS or **FAIL**, then the notes.
func (v *verdict) cell() string {
	res := "PASS"
	if !v.Pass {
		res = "**FAIL**"
	}
	if v.Result != "" {
		res += ": " + v.Result
	}
	return strings.ReplaceAll(res, "|", "\\|")
}

var (
	rowsMu sync.Mutex
	rows   []*row
	seq    int
)

// report starts a row for the test; it is recorded when the test ends, passed or failed.
func report(t *testing.T, scenario string) *row {
	t.Helper()
	rowsMu.Lock()
	seq++
	r := &row{order: seq, Scenario: scenario, Sent: -1, Delivered: -1, Lost: -1, Dup: -1, Recovery: "-"}
	rowsMu.Unlock()
	t.Cleanup(func() {
		r.Pass = !t.Failed()
		rowsMu.Lock()
		rows = append(rows, r)
		rowsMu.Unlock()
		t.Logf("| %s | sent %s | delivered %s | lost %s | dup %s | recovery %s | %s |",
			r.Scenario, num(r.Sent), num(r.Delivered), num(r.Lost), num(r.Dup), r.Recovery, r.Result)
	})
	return r
}

// counts sets sent, delivered (distinct lines), lost and duplicated.
func (r *row) counts(sent int64, c lineCount) {
	r.Sent, r.Delivered, r.Lost, r.Dup = sent, c.distinct, c.lost, c.dup
}

func num(n int64) string {
	if n < 0 {
		return "-"
	}
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func secs(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// byScenario returns a sorted copy of rows: by the text of their scenario before the first '.'
// (its number or letter, right-aligned so that 10 follows 9), then in the order they started.
func byScenario[R any](rows []R, key func(R) (scenario string, order int)) []R {
	sorted := append([]R(nil), rows...)
	prefix := func(r R) (string, int) {
		s, order := key(r)
		n, _, _ := strings.Cut(s, ".")
		return fmt.Sprintf("%4s", n), order
	}
	sort.SliceStable(sorted, func(i, j int) bool {
		a, ai := prefix(sorted[i])
		b, bi := prefix(sorted[j])
		if a != b {
			return a < b
		}
		return ai < bi
	})
	return sorted
}

// table renders the rows as a Markdown table, by scenario number.
func table() string {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	return markdownTable(rows, func(r *row) (string, int) { return r.Scenario, r.order },
		"| scenario | sent | delivered | lost | duplicated | recovery | result |\n|---|---:|---:|---:|---:|---|---|\n",
		func(r *row) string {
			return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s |\n", r.Scenario, num(r.Sent), num(r.Delivered),
				num(r.Lost), num(r.Dup), r.Recovery, r.cell())
		})
}

// markdownTable renders rows sorted byScenario (key) as the lines of a Markdown table under
// head, line(r) each; empty when there are no rows.
func markdownTable[R any](rows []R, key func(R) (scenario string, order int), head string, line func(R) string) string {
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(head)
	for _, r := range byScenario(rows, key) {
		b.WriteString(line(r))
	}
	return b.String()
}

// writeReport writes the table to path (nothing when path is empty or no row was recorded).
func writeReport(path string) error {
	rowsMu.Lock()
	n := len(rows) + len(crows)
	rowsMu.Unlock()
	if path == "" || n == 0 {
		return nil
	}
	mode := "ci"
	if full {
		mode = "full"
	}
	head := fmt.Sprintf("<!-- mode: %s; generated %s -->\n", mode, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	return os.WriteFile(path, []byte(head+table()+clusterTable()), 0o644)
}

// crow is one row of the cluster table: one client in one cluster scenario. Pass is decided by
// the scenario (pairVerdict), not by the test's status: both rows of a scenario are recorded
// whichever failed.
type crow struct {
	order     int
	Scenario  string
	Client    string
	Sent      int64
	Delivered int64
	Lost      int64
	Dup       int64
	Reordered int64
	Exit      string
	Recovery  string
	verdict
	decided bool
}

var crows []*crow

// reportCluster starts the row of client in scenario; it is recorded when the test ends. A row
// the scenario did not decide (it stopped before the read-back) is a failure.
func reportCluster(t *testing.T, scenario, client string) *crow {
	t.Helper()
	rowsMu.Lock()
	seq++
	r := &crow{order: seq, Scenario: scenario, Client: client, Sent: -1, Delivered: -1, Lost: -1, Dup: -1, Reordered: -1,
		Exit: "-", Recovery: "-"}
	rowsMu.Unlock()
	t.Cleanup(func() {
		if !r.decided {
			r.Pass = false
			r.note("the scenario stopped before its read-back: see the test log")
		}
		rowsMu.Lock()
		crows = append(crows, r)
		rowsMu.Unlock()
		status := "PASS"
		if !r.Pass {
			status = "FAIL"
		}
		t.Logf("| %s | %s | sent %s | delivered %s | lost %s | dup %s | reordered %s | exit %s | recovery %s | %s: %s |",
			r.Scenario, r.Client, num(r.Sent), num(r.Delivered), num(r.Lost), num(r.Dup), num(r.Reordered), r.Exit,
			r.Recovery, status, r.Result)
	})
	return r
}

// clusterTable renders the cluster rows by scenario (the letter before the first '.'), the agent
// beside Java; empty when no cluster scenario ran.
func clusterTable() string {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	table := markdownTable(crows, func(r *crow) (string, int) { return r.Scenario, r.order },
		"| scenario | client | sent | delivered | lost | duplicated | reordered | exit | recovery | result |\n"+
			"|---|---|---:|---:|---:|---:|---:|---:|---|---|\n",
		func(r *crow) string {
			return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Scenario, r.Client, num(r.Sent),
				num(r.Delivered), num(r.Lost), num(r.Dup), num(r.Reordered), r.Exit, r.Recovery, r.cell())
		})
	if table == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n### Cluster faults (three brokers)\n\n")
	b.WriteString("The agent beside a Java producer (the control: the Apache Kafka Java client, reliability/javactl/ControlProducer.java)\n" +
		"through the same faults of a three-node KRaft cluster (scripts/kafka/cluster.sh), concurrently, each on its own topic\n" +
		"(RF 3, min.insync.replicas 2, the same replica assignment), fed the same keyed lines at the same pace, with the same\n" +
		"producer properties. **lost**: lines the scenario needs that are not in Kafka (a line it lets fail counts only if the\n" +
		"client did not report it failed); **reordered**: a line after a higher-numbered line of its key in its partition;\n" +
		"**recovery**: from the topics' append times (LogAppendTime), as each row says. Rule: where Java loses nothing and keeps\n" +
		"order, the agent must not lose or reorder, nor have more duplicates than Java; a Java row that loses means the\n" +
		"scenario is wrong. Rows m (one slow broker: keyless lines at full speed, each client alone, records/s from the\n" +
		"append times) and o (an ACL granted late: both log in on the SASL listener, the agent follows a file) say how\n" +
		"they differ.\n\n")
	b.WriteString(table)
	return b.String()
}
