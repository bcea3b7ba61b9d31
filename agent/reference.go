package agent

import (
	"fmt"
	"reflect"
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
	fmt.Fprintf(&b, "| `-X KEY=VALUE` | `AGENT_PRODUCER_<KEY>` | | a producer property (below) by its Java name; in the file under `producer:` |\n")
	fmt.Fprintf(&b, "| `--config FILE` | `AGENT_CONFIG` | | YAML file with the keys above |\n")
	b.WriteString("\n### Producer properties (Java client names and defaults)\n\n")
	fmt.Fprintf(&b, "The agent changes three defaults: `client.id` is `%s`, `buffer.memory` is `%d` "+
		"(%d MiB: the files are the durable buffer, so memory only has to keep the brokers busy), and "+
		"`delivery.timeout.ms` is `%d` (a broker restart must not turn waiting lines into failed ones). "+
		"Everything else is the Java client's default.\n\n", AgentClientID, AgentBufferMemory, AgentBufferMemory>>20, AgentDeliveryTimeoutMs)
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
