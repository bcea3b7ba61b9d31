package agent

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/kafkatrail/kafkatrail/producer"
)

// ReferenceMarkdown renders the configuration reference of the README from the definitions
// themselves (Config's and producer.Config's tags and defaults), so the two cannot drift: a test
// fails when the README's copy is stale.
func ReferenceMarkdown() string {
	var b strings.Builder
	b.WriteString("### Agent keys\n\n")
	b.WriteString("| flag / file key | environment | default | meaning |\n|---|---|---|---|\n")
	def := DefaultConfig()
	v := reflect.ValueOf(def)
	for _, f := range configKeys() {
		if f.key == "producer" {
			continue
		}
		if f.key == "inputs" {
			fmt.Fprintf(&b, "| `inputs:` (file) | | | %s |\n", f.doc)
			continue
		}
		d := fmt.Sprint(v.FieldByIndex(f.index).Interface())
		switch f.key {
		case "state-dir":
			d = "`$STATE_DIRECTORY`, else `~/.local/state/kafkatrail`"
		default:
			if dur, ok := v.FieldByIndex(f.index).Interface().(time.Duration); ok {
				d = dur.String()
			}
			if d == "" || d == "[]" || d == "false" && f.kind != reflect.Bool {
				d = "(none)"
			}
			d = "`" + d + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s |\n", f.key, EnvName(f.key), d, f.doc)
	}
	fmt.Fprintf(&b, "| `-X KEY=VALUE` | `%sPRODUCER_<KEY>` | | a producer property (below) by its Java name; in the file under `producer:` |\n", EnvPrefix)
	fmt.Fprintf(&b, "| `--config FILE` | `%s` | | YAML file with the keys above |\n", EnvName("config"))
	writeEnvNotes(&b)
	b.WriteString("\n### Producer properties (Java client names and defaults)\n\n")
	fmt.Fprintf(&b, "The agent changes four defaults: `client.id` is `%s`, `buffer.memory` is `%d` "+
		"(%d MiB: the files are the durable buffer, so memory only has to keep the brokers busy), `batch.size` is `%d` "+
		"(%d KiB: the producer sends at most one batch per partition in each of its 5 requests in flight, so "+
		"batch.size bounds what a partition ships per round trip; 16 KiB falls behind a 50,000 lines/s log "+
		"at 100 ms from the broker), and "+
		"`delivery.timeout.ms` is `%d` (a broker restart must not turn waiting lines into failed ones). "+
		"Everything else is the Java client's default.\n\n", AgentClientID, AgentBufferMemory, AgentBufferMemory>>20,
		AgentBatchSize, AgentBatchSize>>10, AgentDeliveryTimeoutMs)
	b.WriteString("| property | default | meaning |\n|---|---|---|\n")
	for _, p := range producer.Properties() {
		d := p.Default
		if d == "" {
			d = "(none)"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", p.Key, d, p.Doc)
	}
	return b.String()
}

// writeEnvNotes says how the environment is read beyond the table: the old names, the
// variables of other programs and of the project itself.
func writeEnvNotes(b *strings.Builder) {
	fmt.Fprintf(b, "\nThe `%s*` names of the table are the agent's own. Their former `%s*` names still work "+
		"in this release, each with a warning at start naming the new variable (which wins when both are set). "+
		"Any other `%s*` variable is ignored: other software sets its own (Azure Pipelines: `AGENT_NAME`, `AGENT_OS`, `AGENT_ID`). "+
		"A `%s*` variable that names no key is ignored with a warning that names it. "+
		"These `%s*` variables are the project's own and are not configuration:\n\n", EnvPrefix, LegacyEnvPrefix, LegacyEnvPrefix, EnvPrefix, EnvPrefix)
	for _, name := range slices.Sorted(maps.Keys(projectEnv)) {
		fmt.Fprintf(b, "- `%s`: %s\n", name, projectEnv[name])
	}
}
