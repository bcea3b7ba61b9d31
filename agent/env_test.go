package agent

import (
	"bytes"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kafkatrail/kafkatrail/producer"
)

// envLog logs r as the agent does at start, at level, and returns the text written.
func envLog(r EnvReport, level slog.Level) string {
	var b bytes.Buffer
	r.Log(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: level})))
	return b.String()
}

// linesNaming returns the lines of log that mention name as a whole variable name.
func linesNaming(log, name string) []string {
	re := regexp.MustCompile(`(^|[^A-Z0-9_])` + regexp.QuoteMeta(name) + `($|[^A-Z0-9_])`)
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if re.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// The variables Azure Pipelines sets on every build machine: the agent must start among them,
// read none of them and say nothing about them above debug. They used to refuse the start
// ("AGENT_OS: unknown AGENT_ environment variable").
func TestEnvForeignAgentVariablesAreIgnored(t *testing.T) {
	environ := []string{"AGENT_OS=Linux", "AGENT_NAME=Azure Pipelines 3", "AGENT_ID=12", "AGENT_TEMPDIRECTORY=/home/vsts/work/_temp",
		"AGENT_JOBSTATUS=Succeeded", "KAFKATRAIL_TOPIC=t", "KAFKATRAIL_BROKERS=127.0.0.1:9092"}
	c, err := load(t, nil, environ)
	if err != nil {
		t.Fatalf("the configuration does not load among another program's AGENT_ variables: %v", err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := ReadEnv(environ)
	if want := []string{"AGENT_ID", "AGENT_JOBSTATUS", "AGENT_NAME", "AGENT_OS", "AGENT_TEMPDIRECTORY"}; !slices.Equal(r.Foreign, want) {
		t.Errorf("foreign variables %v, want %v", r.Foreign, want)
	}
	if len(r.Deprecated)+len(r.Unknown) != 0 {
		t.Errorf("report %+v: AGENT_OS and the like are neither deprecated names nor typos", r)
	}
	if got := envLog(r, slog.LevelInfo); got != "" {
		t.Errorf("at info the agent says about another program's variables:\n%s", got)
	}
	if got := envLog(r, slog.LevelDebug); strings.Count(got, "\n") != 1 || len(linesNaming(got, "AGENT_OS")) != 1 {
		t.Errorf("at debug, want one line naming them all, got:\n%s", got)
	}
}

// A former AGENT_ name of a key still sets it for this release, and the agent warns once per
// variable, naming the variable to use instead.
func TestEnvLegacyNameWorksAndWarnsOnce(t *testing.T) {
	file := writeFile(t, "brokers: [127.0.0.1:9092]\nkey-field: from-file\n")
	environ := []string{"AGENT_TOPIC=first", "AGENT_TOPIC=legacy", "AGENT_PRODUCER_LINGER_MS=20", "AGENT_TAIL=/a.log,/b.log", "AGENT_CONFIG=" + file}
	c, err := load(t, nil, environ)
	if err != nil {
		t.Fatal(err)
	}
	if c.Topic != "legacy" || c.Producer["linger.ms"] != "20" || len(c.Tail) != 2 || c.KeyField != "from-file" {
		t.Fatalf("legacy names not read: topic %q linger.ms %q tail %v key-field (from AGENT_CONFIG's file) %q",
			c.Topic, c.Producer["linger.ms"], c.Tail, c.KeyField)
	}
	r := ReadEnv(environ)
	want := []DeprecatedEnv{
		{Name: "AGENT_CONFIG", Use: "KAFKATRAIL_CONFIG"},
		{Name: "AGENT_PRODUCER_LINGER_MS", Use: "KAFKATRAIL_PRODUCER_LINGER_MS"},
		{Name: "AGENT_TAIL", Use: "KAFKATRAIL_TAIL"},
		{Name: "AGENT_TOPIC", Use: "KAFKATRAIL_TOPIC"},
	}
	if !slices.Equal(r.Deprecated, want) {
		t.Fatalf("deprecated %+v, want %+v", r.Deprecated, want)
	}
	log := envLog(r, slog.LevelDebug)
	for _, d := range want {
		lines := linesNaming(log, d.Name)
		if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || len(linesNaming(lines[0], d.Use)) != 1 {
			t.Errorf("want one warning naming %s and %s, got %q", d.Name, d.Use, lines)
		}
	}
}

// The KAFKATRAIL_ name of a key sets it, and wins over its AGENT_ name whichever comes first.
func TestEnvNewNameWinsOverLegacy(t *testing.T) {
	for _, environ := range [][]string{
		{"AGENT_TOPIC=old", "KAFKATRAIL_TOPIC=new", "AGENT_PRODUCER_ACKS=1", "KAFKATRAIL_PRODUCER_ACKS=all"},
		{"KAFKATRAIL_TOPIC=new", "AGENT_TOPIC=old", "KAFKATRAIL_PRODUCER_ACKS=all", "AGENT_PRODUCER_ACKS=1"},
	} {
		c, err := load(t, nil, environ)
		if err != nil {
			t.Fatal(err)
		}
		if c.Topic != "new" || c.Producer["acks"] != "all" {
			t.Errorf("%v: topic %q acks %q, want the KAFKATRAIL_ values new and all", environ, c.Topic, c.Producer["acks"])
		}
		r := ReadEnv(environ)
		want := []DeprecatedEnv{
			{Name: "AGENT_PRODUCER_ACKS", Use: "KAFKATRAIL_PRODUCER_ACKS", Overridden: true},
			{Name: "AGENT_TOPIC", Use: "KAFKATRAIL_TOPIC", Overridden: true},
		}
		if !slices.Equal(r.Deprecated, want) {
			t.Errorf("%v: deprecated %+v, want %+v", environ, r.Deprecated, want)
		}
		if lines := linesNaming(envLog(r, slog.LevelInfo), "AGENT_TOPIC"); len(lines) != 1 || !strings.Contains(lines[0], "KAFKATRAIL_TOPIC is set and wins") {
			t.Errorf("%v: want one warning that AGENT_TOPIC is not read, got %q", environ, lines)
		}
	}
	// Flags still beat the environment.
	c, err := load(t, []string{"--topic", "flag"}, []string{"KAFKATRAIL_TOPIC=env"})
	if err != nil || c.Topic != "flag" {
		t.Fatalf("topic %q, %v: want the flag's", c.Topic, err)
	}
}

// An unknown KAFKATRAIL_ variable is a typo, most likely: a warning names it, and the
// configuration still loads (it used to be ignored without a word).
func TestEnvUnknownVariableWarnsNamingIt(t *testing.T) {
	// Built, not written out: the repository must name no unknown variable (TestEnvEveryProjectVariableIsListed).
	typo, propTypo := EnvName("topic")+"C", EnvName("producer.lingr.ms")
	environ := []string{typo + "=x", propTypo + "=5", "KAFKATRAIL_BROKERS=127.0.0.1:9092", "KAFKATRAIL_TOPIC=t"}
	c, err := load(t, nil, environ)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("an unknown producer property from the environment is not ignored: %v", err)
	}
	if _, ok := c.Producer["lingr.ms"]; ok {
		t.Error("the unknown property reached the producer's configuration")
	}
	r := ReadEnv(environ)
	if want := []string{propTypo, typo}; !slices.Equal(r.Unknown, want) {
		t.Fatalf("unknown %v, want %v", r.Unknown, want)
	}
	log := envLog(r, slog.LevelInfo)
	for name, near := range map[string]string{typo: "KAFKATRAIL_TOPIC", propTypo: "KAFKATRAIL_PRODUCER_LINGER_MS"} {
		if lines := linesNaming(log, name); len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "did_you_mean="+near) {
			t.Errorf("want one warning naming %s and suggesting %s, got %q in:\n%s", name, near, lines, log)
		}
	}
	// A name far from every key gets no suggestion.
	far := EnvPrefix + "SOMETHING_ELSE"
	if got := envLog(ReadEnv([]string{far + "=1"}), slog.LevelInfo); !strings.Contains(got, "variable="+far) || strings.Contains(got, "did_you_mean") {
		t.Errorf("a name far from every key: %s", got)
	}
}

// The project's own KAFKATRAIL_ variables (the scripts', the tests', the profiling switches)
// are not configuration and say nothing.
func TestEnvProjectVariablesDoNotWarn(t *testing.T) {
	environ := []string{"KAFKATRAIL_TOPIC=t"}
	for name := range projectEnv {
		environ = append(environ, name+"=1")
	}
	c, err := load(t, nil, environ)
	if err != nil || c.Topic != "t" {
		t.Fatalf("topic %q, %v", c.Topic, err)
	}
	r := ReadEnv(environ)
	if len(r.Unknown)+len(r.Deprecated)+len(r.Foreign) != 0 {
		t.Fatalf("report %+v, want nothing", r)
	}
	if got := envLog(r, slog.LevelDebug); got != "" {
		t.Fatalf("the project's own variables are logged:\n%s", got)
	}
}

// Every key, producer property and --config has a variable of its own, and none is named like
// one of the project's own variables (which would set a key from a script's setting), nor under
// KAFKATRAIL_PRODUCER_, where every name is a property.
func TestEnvNamesDoNotCollide(t *testing.T) {
	names := map[string]string{EnvName("config"): "--config"}
	add := func(key string) {
		name := EnvName(key)
		if other, ok := names[name]; ok {
			t.Errorf("%s and %s are both %s", key, other, name)
		}
		names[name] = key
	}
	for _, f := range configKeys() {
		if f.key != "producer" && f.key != "inputs" { // inputs: the file's only
			add(f.key)
		}
	}
	for _, p := range producer.Properties() {
		add("producer." + p.Key)
	}
	if len(envVars()) != len(names) {
		t.Errorf("%d variables read, %d names: two keys share a variable", len(envVars()), len(names))
	}
	for name := range names {
		if _, ok := envVars()[strings.TrimPrefix(name, EnvPrefix)]; !ok {
			t.Errorf("%s (%s) is not read", name, names[name])
		}
		if _, ok := projectEnv[name]; ok {
			t.Errorf("%s is a configuration variable (%s) and one of the project's own", name, names[name])
		}
	}
	for name := range projectEnv {
		if !strings.HasPrefix(name, EnvPrefix) || strings.HasPrefix(name, EnvPrefix+"PRODUCER_") {
			t.Errorf("project variable %s: want it under %s, and not under %sPRODUCER_", name, EnvPrefix, EnvPrefix)
		}
	}
}

// Every KAFKATRAIL_ variable named anywhere in the repository (scripts, Makefile, CI, docs,
// tests, code) is a configuration variable or one of the project's own, listed in projectEnv:
// a script's new variable that is not listed would warn in every agent it starts.
func TestEnvEveryProjectVariableIsListed(t *testing.T) {
	const root = ".."
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(EnvPrefix + `[A-Z0-9_]+`)
	seen := map[string]string{} // name: first file
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".test") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil || bytes.IndexByte(data, 0) >= 0 {
			return err // binary files name no variable
		}
		for _, name := range re.FindAllString(string(data), -1) {
			if _, ok := seen[name]; !ok {
				seen[name] = path
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := seen["KAFKATRAIL_CACHE"]; !ok {
		t.Fatal("the scan did not find KAFKATRAIL_CACHE in the scripts: it reads the wrong tree")
	}
	for name, path := range seen {
		if strings.HasSuffix(name, "_") {
			continue // a prefix such as KAFKATRAIL_PRODUCER_<KEY>
		}
		_, config := envVars()[strings.TrimPrefix(name, EnvPrefix)]
		_, own := projectEnv[name]
		if !config && !own {
			t.Errorf("%s (in %s) is neither a configuration variable nor listed in projectEnv (agent/env.go)", name, path)
		}
	}
}

// The README's generated reference names the variables by the new prefix and lists the
// project's own.
func TestEnvReferenceShowsNewNames(t *testing.T) {
	ref := ReferenceMarkdown()
	for _, row := range []string{"| `--topic` | `KAFKATRAIL_TOPIC` |", "| `-X KEY=VALUE` | `KAFKATRAIL_PRODUCER_<KEY>` |", "| `--config FILE` | `KAFKATRAIL_CONFIG` |"} {
		if !strings.Contains(ref, row) {
			t.Errorf("the reference lacks %q", row)
		}
	}
	if strings.Contains(ref, "| `AGENT_") {
		t.Error("the reference's table still names AGENT_ variables")
	}
	for name := range projectEnv {
		if !strings.Contains(ref, "- `"+name+"`: ") {
			t.Errorf("the reference does not list %s", name)
		}
	}
}
