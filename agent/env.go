package agent

import (
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/kafkatrail/kafkatrail/producer"
)

// EnvPrefix starts the name of every environment variable the agent reads as configuration:
// EnvPrefix and the key in upper case, '-' and '.' as '_' (KAFKATRAIL_KEY_FIELD,
// KAFKATRAIL_PRODUCER_LINGER_MS). The project's own prefix: no other software sets it.
const EnvPrefix = "KAFKATRAIL_"

// LegacyEnvPrefix is the prefix the agent's variables had before EnvPrefix. Other software sets
// variables under it too (Azure Pipelines sets AGENT_NAME, AGENT_OS, AGENT_ID and more on every
// build machine), so only an AGENT_ name of a key is read, with a warning naming the new
// variable; any other is someone else's and ignored. Accepted for one release.
const LegacyEnvPrefix = "AGENT_"

// projectEnv is every KAFKATRAIL_ variable of the project that is not configuration: the
// scripts', the tests' and the agent's profiling switches. They never warn, and no key may be
// named like one (TestEnvNamesDoNotCollide; TestEveryProjectVariableIsKnown finds them in the
// repository). The README's reference lists them from here.
var projectEnv = map[string]string{
	"KAFKATRAIL_CPUPROFILE":              "the agent writes a CPU profile to this file while it runs (`go tool pprof`)",
	"KAFKATRAIL_MEMPROFILE":              "the agent writes the allocations since start to this file when it stops",
	"KAFKATRAIL_EXECTRACE":               "the agent writes an execution trace to this file (`go tool trace`)",
	"KAFKATRAIL_RELEASE_STARTUP_PAGES":   "0 keeps the executable's pages the agent's start touched mapped (by default they are given back as the agent starts, 0.3 s and 5 s after the start)",
	"KAFKATRAIL_STATE":                   "scripts/kafka/broker.sh: the test broker's state directory",
	"KAFKATRAIL_CLUSTER_STATE":           "scripts/kafka/cluster.sh: the three-broker test cluster's state directory",
	"KAFKATRAIL_CACHE":                   "scripts: where the Kafka jars and the tools built for the demo and the benchmarks are kept",
	"KAFKATRAIL_CLIENT_TELEMETRY_PLUGIN": "scripts/kafka/broker.sh start: 1 gives the test broker a KIP-714 client telemetry receiver",
	"KAFKATRAIL_UPDATE_README":           "`go test ./agent/ -run Reference` rewrites this reference",
	"KAFKATRAIL_UPDATE_DOCS":             "`go test ./telemetry/ -run Doc` rewrites the generated parts of docs/telemetry.md",
	"KAFKATRAIL_UPDATE_MANIFEST":         "`make k8s-manifest` rewrites configs/kubernetes-daemonset.yaml from the Helm chart",
	"KAFKATRAIL_RELEASE_TEST":            "scripts/release-test.sh: 1 runs release/'s install tests (dpkg, rpm, the image in a chroot) against its broker",
	"KAFKATRAIL_DIST":                    "scripts/release-test.sh: the dist/ directory of `make release` that release/'s tests install from",
	"KAFKATRAIL_TEST_DEBUG":              "tests log the producer at debug level",
	"KAFKATRAIL_SCREENSHOT":              "the browser test leaves its screenshot of the status page in this file",
	"KAFKATRAIL_OUTAGE_SCREENSHOT":       "the outage test leaves its screenshot of the status page during the outage in this file",
	"KAFKATRAIL_HOGS":                    "scripts/under-load.sh: how many CPU hogs run beside the command (default: one per core)",
	"KAFKATRAIL_HOG_NICE":                "scripts/under-load.sh: the hogs' nice level (default 0: the same priority as the tests)",
}

// envTarget is what one variable sets: a key of the koanf map, read as a list or as a string.
type envTarget struct {
	key  string // koanf key: "topic", "producer/linger.ms", or "config" for the file's path
	list bool
	// lines: a list of regular expressions, which may hold commas: one per line of the value.
	lines bool
}

// patternLists are the list keys whose values are regular expressions.
var patternLists = map[string]bool{"include-lines": true, "exclude-lines": true, "redact": true}

// splitLines is the non-blank lines of s, trimmed of a trailing carriage return only (a
// pattern's own spaces are part of it).
func splitLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSuffix(l, "\r"); strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// envVars maps every configuration variable's name, without its prefix, to what it sets:
// TOPIC, KEY_FIELD, PRODUCER_LINGER_MS, CONFIG. A table rather than a reverse mapping of '_',
// so that an unknown name is known to be unknown.
var envVars = sync.OnceValue(func() map[string]envTarget {
	m := map[string]envTarget{"CONFIG": {key: "config"}}
	for _, f := range configKeys() {
		if f.key == "producer" || f.key == "inputs" {
			continue // a map: its properties have a variable each; a list of maps, in the file only
		}
		m[envSuffix(f.key)] = envTarget{key: f.key, list: f.kind == reflect.Slice, lines: patternLists[f.key]}
	}
	for _, p := range producer.Properties() {
		m[envSuffix("producer."+p.Key)] = envTarget{key: "producer/" + p.Key}
	}
	return m
})

// envSuffix is a key's variable name without the prefix: upper case, '-' and '.' as '_'.
func envSuffix(key string) string {
	return strings.NewReplacer("-", "_", ".", "_").Replace(strings.ToUpper(key))
}

// EnvName is the environment variable for a key: EnvPrefix and the key in upper case, '-' and
// '.' as '_' (KAFKATRAIL_KEY_FIELD, KAFKATRAIL_PRODUCER_LINGER_MS).
func EnvName(key string) string { return EnvPrefix + envSuffix(key) }

// DeprecatedEnv is an AGENT_ variable read as configuration, and the variable to use instead.
type DeprecatedEnv struct {
	Name, Use string
	// Overridden is true when Use is set too: its value wins and Name's is not read.
	Overridden bool
}

// EnvReport is what the environment held besides the settings themselves, for the agent to log
// once at start (ReadEnv). It holds variable names only, never values: a value may be a secret.
type EnvReport struct {
	// Deprecated are the AGENT_ variables read as configuration, in name order.
	Deprecated []DeprecatedEnv
	// Unknown are the KAFKATRAIL_ variables that name no key and are not the project's own:
	// typos, most likely. They are ignored.
	Unknown []string
	// Foreign are the AGENT_ variables that name no key: another program's, ignored.
	Foreign []string
}

// ReadEnv reports the deprecated, unknown and foreign variables of environ (NAME=VALUE
// entries, as os.Environ gives them).
func ReadEnv(environ []string) EnvReport {
	_, _, r := fromEnv(environ)
	return r
}

// Log writes the report to log: a warning for each deprecated or unknown variable, and the
// foreign ones in one debug line.
func (r EnvReport) Log(log *slog.Logger) {
	for _, d := range r.Deprecated {
		if d.Overridden {
			log.Warn("deprecated environment variable ignored: "+d.Use+" is set and wins", "variable", d.Name, "use", d.Use)
			continue
		}
		log.Warn("deprecated environment variable: it will stop working in the next release", "variable", d.Name, "use", d.Use)
	}
	for _, name := range r.Unknown {
		const msg = "unknown environment variable ignored: no configuration key has this name (see the README's reference)"
		if near := nearestEnvName(name); near != "" {
			log.Warn(msg, "variable", name, "did_you_mean", near)
		} else {
			log.Warn(msg, "variable", name)
		}
	}
	if len(r.Foreign) > 0 {
		log.Debug("AGENT_ environment variables that name no key ignored: another program's", "variables", r.Foreign)
	}
}

// fromEnv maps the configuration variables of environ to koanf keys (values), and returns the
// configuration file's path from KAFKATRAIL_CONFIG or AGENT_CONFIG. A KAFKATRAIL_ name wins over
// the AGENT_ name of the same key; of two entries of one name, the last wins, as in os/exec.
func fromEnv(environ []string) (values map[string]any, configPath string, r EnvReport) {
	vars := envVars()
	current, legacy := map[string]string{}, map[string]string{} // by suffix
	unknown, foreign := map[string]bool{}, map[string]bool{}
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if suffix, ok := strings.CutPrefix(name, EnvPrefix); ok {
			_, known := vars[suffix]
			_, own := projectEnv[name]
			switch {
			case known:
				current[suffix] = value
			case !own:
				unknown[name] = true
			}
		} else if suffix, ok := strings.CutPrefix(name, LegacyEnvPrefix); ok {
			if _, known := vars[suffix]; known {
				legacy[suffix] = value
			} else {
				foreign[name] = true
			}
		}
	}
	values = map[string]any{}
	set := func(suffix, value string) {
		t := vars[suffix]
		switch {
		case t.key == "config":
			configPath = value
		case t.lines:
			values[t.key] = splitLines(value)
		case t.list:
			values[t.key] = splitList(value)
		default:
			values[t.key] = value
		}
	}
	for suffix, value := range legacy {
		_, overridden := current[suffix]
		r.Deprecated = append(r.Deprecated, DeprecatedEnv{Name: LegacyEnvPrefix + suffix, Use: EnvPrefix + suffix, Overridden: overridden})
		if !overridden {
			set(suffix, value)
		}
	}
	for suffix, value := range current {
		set(suffix, value)
	}
	slices.SortFunc(r.Deprecated, func(a, b DeprecatedEnv) int { return strings.Compare(a.Name, b.Name) })
	r.Unknown = slices.Sorted(maps.Keys(unknown))
	r.Foreign = slices.Sorted(maps.Keys(foreign))
	return values, configPath, r
}

// nearestEnvName is the configuration variable closest to name, at most two edits away (a
// letter typed twice, left out or swapped), or "" when none is that close.
func nearestEnvName(name string) string {
	suffix := strings.TrimPrefix(name, EnvPrefix)
	best, bestDist := "", 3
	for _, s := range slices.Sorted(maps.Keys(envVars())) {
		if d := editDistance(suffix, s); d < bestDist {
			best, bestDist = EnvPrefix+s, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b (bytes: the names are ASCII).
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
