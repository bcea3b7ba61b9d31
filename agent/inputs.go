package agent

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"
)

// ImplicitInput is the name of the input that the top-level keys (the flags, the environment,
// the file's own tail and stdin) describe.
const ImplicitInput = "default"

// inputKeys are the keys an entry of `inputs:` may set besides its name: its source and how its
// lines become records. Every key it leaves out takes the top level's value.
var inputKeys = []string{"tail", "stdin",
	"topic", "fallback-topic", "max-topics", "parse-regex", "key", "key-field", "key-regex", "header",
	"header-path", "header-host", "include-lines", "exclude-lines", "redact",
	"format", "timestamp-field", "timestamp-layout",
	"multiline", "multiline-start", "multiline-continue", "multiline-max-lines", "multiline-timeout",
	"start-at", "long-lines", "max-line-bytes", "container-format",
	"max-lines-per-second", "max-bytes-per-second", "dead-letter-topic"}

// rateKeys are the keys of the rate limit: an input that sets either has a limit of its own;
// the others share the top level's.
var rateKeys = []string{"max-lines-per-second", "max-bytes-per-second"}

// inputName is what an input's name may be: it names a directory of the state directory.
var inputName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// NamedConfig is one input's effective configuration: the top level's, with what its entry of
// `inputs:` sets.
type NamedConfig struct {
	Name string
	// OwnRateLimit says the input's entry sets a rate limit key: its lines wait for a limit of
	// their own, not for the one the top level's and the other inputs' lines share.
	OwnRateLimit bool
	Config
}

// InputConfigs returns the inputs the agent runs: the implicit one when the top level has a
// source (tail or stdin) or there is no other, then every entry of `inputs:`, each with its
// effective configuration. An entry's error names its key as inputs[NAME].KEY.
func (c *Config) InputConfigs() ([]NamedConfig, error) {
	var out []NamedConfig
	if len(c.Tail) > 0 || c.Stdin || len(c.Inputs) == 0 {
		own := *c
		own.Inputs = nil
		out = append(out, NamedConfig{Name: ImplicitInput, Config: own})
	}
	seen := map[string]bool{ImplicitInput: true}
	readsStdin := "" // the input that reads stdin
	if c.Stdin {
		readsStdin = ImplicitInput
	}
	var errs []error
	for i, entry := range c.Inputs {
		name, _ := entry["name"].(string)
		where := fmt.Sprintf("inputs[%d]", i)
		if name != "" {
			where = "inputs[" + name + "]"
		}
		bad := func(key, format string, args ...any) {
			if key != "" {
				key = "." + key
			}
			errs = append(errs, &ConfigError{Key: where + key, Reason: fmt.Sprintf(format, args...)})
		}
		switch {
		case !inputName.MatchString(name):
			bad("name", "required: letters, digits, '.', '_' and '-', at most 64, got %q", name)
			continue
		case seen[name]:
			bad("name", "%q names two inputs (%q is the top level's)", name, ImplicitInput)
			continue
		}
		seen[name] = true
		for key := range entry {
			if key != "name" && !slices.Contains(inputKeys, key) {
				bad(key, "not a key of an input (an input sets %s)", strings.Join(inputKeys, ", "))
			}
		}
		ic, err := c.inputConfig(entry)
		if err != nil {
			bad("", "%v", err) // a value of the wrong type: the decoder's error names the key
			continue
		}
		switch {
		case len(ic.Tail) == 0 && !ic.Stdin:
			bad("tail", "required: the files this input follows (or stdin: true)")
			continue
		case len(ic.Tail) > 0 && ic.Stdin:
			bad("stdin", "an input follows files (tail) or reads stdin, not both")
			continue
		case ic.Stdin && readsStdin != "":
			bad("stdin", "only one input can read stdin, and %q does", readsStdin)
			continue
		case ic.Stdin:
			readsStdin = name
		}
		own := slices.ContainsFunc(rateKeys, func(k string) bool { _, ok := entry[k]; return ok })
		out = append(out, NamedConfig{Name: name, OwnRateLimit: own, Config: ic})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// inputConfig is c with entry's keys set (the same decoding as the file's), without inputs.
func (c *Config) inputConfig(entry map[string]any) (Config, error) {
	m := toMap(*c)
	delete(m, "inputs")
	m["stdin"] = false // the top level's source is its own
	for key, v := range entry {
		if key != "name" {
			m[key] = v
		}
	}
	k := koanf.New("/")
	if err := k.Load(confmap.Provider(m, "/"), nil); err != nil {
		return Config{}, err
	}
	var ic Config
	if err := k.UnmarshalWithConf("", &ic, koanf.UnmarshalConf{Tag: "koanf"}); err != nil {
		return Config{}, err
	}
	ic.Producer, ic.Inputs = c.Producer, nil
	return ic, nil
}

// inputStateDir is where an input keeps its checkpoints: the state directory itself for the
// implicit input (so an agent given inputs later keeps its positions), a directory of its own
// for each other, so that two inputs that follow one file keep two positions.
func inputStateDir(stateDir, name string) string {
	if name == ImplicitInput {
		return stateDir
	}
	return filepath.Join(stateDir, "inputs", name)
}

// validateInputs checks the `inputs:` entries: each one's effective configuration, its errors
// named inputs[NAME].KEY (only those of the keys an input can set: the others are the top
// level's, reported once), and what the agent cannot do with several inputs.
func (c *Config) validateInputs() []error {
	if len(c.Inputs) == 0 {
		return nil
	}
	var errs []error
	inputs, err := c.InputConfigs()
	if err != nil {
		return append(errs, unjoin(err)...)
	}
	for _, in := range inputs {
		if in.Name == ImplicitInput {
			continue
		}
		if in.Stdin && c.ExactlyOnce {
			errs = append(errs, &ConfigError{Key: "inputs[" + in.Name + "].stdin", Reason: "not with --exactly-once: standard input cannot be read again after a crash, so its lines cannot be sent exactly once"})
		}
		for _, e := range unjoin(in.Config.Validate()) {
			var ce *ConfigError
			if errors.As(e, &ce) && (slices.Contains(inputKeys, ce.Key) || ce.Key == "key") {
				errs = append(errs, &ConfigError{Key: "inputs[" + in.Name + "]." + ce.Key, Reason: ce.Reason})
			}
		}
	}
	return errs
}
