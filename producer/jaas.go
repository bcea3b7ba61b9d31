package producer

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kafkatrail/kafkatrail/internal/kerberos"
	"github.com/kafkatrail/kafkatrail/internal/mskiam"
)

// JAAS login modules whose options the producer reads from sasl.jaas.config, so that a Java
// client's properties work unchanged.
const (
	jaasOAuthBearerModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
	jaasPlainModule       = "org.apache.kafka.common.security.plain.PlainLoginModule"
	jaasScramModule       = "org.apache.kafka.common.security.scram.ScramLoginModule"
)

// Login callback handlers sasl.login.callback.handler.class may name: the one that fetches
// OAUTHBEARER tokens from sasl.oauthbearer.token.endpoint.url, which this producer does itself
// (the secured package's name is the old one, kept by Kafka as an alias).
var knownLoginCallbackHandlers = map[string]bool{
	"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler":         true,
	"org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler": true,
	mskiam.OAuthBearerLoginCallbackHandler:                                                 true,
}

// jaasEntry is one login module entry of sasl.jaas.config: `Module flag key="value" ...;`.
type jaasEntry struct {
	module  string
	options map[string]string
}

// parseJAAS reads sasl.jaas.config as Java's JaasConfig does for the one entry a client has: the
// login module's class, its control flag, then key=value options (values quoted, with \" and \\
// escapes, or bare), ended by a semicolon. Errors never quote a value: it may be a secret.
func parseJAAS(s string) (*jaasEntry, error) {
	p := &jaasLexer{s: s}
	module := p.word()
	if module == "" {
		return nil, errors.New("want `LoginModuleClass required key=\"value\" ...;`")
	}
	switch flag := strings.ToLower(p.word()); flag {
	case "required", "requisite", "sufficient", "optional":
	default:
		return nil, fmt.Errorf("login module %s: want a control flag (required, requisite, sufficient, optional)", module)
	}
	e := &jaasEntry{module: module, options: map[string]string{}}
	for {
		p.space()
		if p.done() {
			return nil, errors.New("missing the closing ;")
		}
		if p.peek() == ';' {
			p.i++
			p.space()
			if !p.done() {
				return nil, errors.New("more than one login module entry")
			}
			return e, nil
		}
		key := p.word()
		if key == "" || p.done() || p.peek() != '=' {
			return nil, fmt.Errorf("login module %s: want key=value options", module)
		}
		p.i++
		val, err := p.value()
		if err != nil {
			return nil, fmt.Errorf("login module %s, option %s: %v", module, key, err)
		}
		e.options[key] = val
	}
}

type jaasLexer struct {
	s string
	i int
}

func (p *jaasLexer) done() bool { return p.i >= len(p.s) }
func (p *jaasLexer) peek() byte { return p.s[p.i] }

func (p *jaasLexer) space() {
	for !p.done() && strings.IndexByte(" \t\r\n", p.peek()) >= 0 {
		p.i++
	}
}

// word reads a bare token: up to a space, '=', ';' or a quote.
func (p *jaasLexer) word() string {
	p.space()
	start := p.i
	for !p.done() && strings.IndexByte(" \t\r\n=;\"", p.peek()) < 0 {
		p.i++
	}
	return p.s[start:p.i]
}

// escape reads the escape after a backslash in a quoted value as Java's JaasConfig reads it
// (java.io.StreamTokenizer): \a \b \f \n \r \t \v, an octal byte (up to three digits, the
// first at most 3 when there are three), and any other character as itself (\" and \\).
func (p *jaasLexer) escape(b *strings.Builder) {
	c := p.peek()
	p.i++
	if c >= '0' && c <= '7' {
		n, digits := int(c-'0'), 3
		if c > '3' {
			digits = 2
		}
		for d := 1; d < digits && !p.done() && p.peek() >= '0' && p.peek() <= '7'; d++ {
			n = n*8 + int(p.peek()-'0')
			p.i++
		}
		b.WriteByte(byte(n))
		return
	}
	if i := strings.IndexByte("abfnrtv", c); i >= 0 {
		b.WriteByte("\a\b\f\n\r\t\v"[i])
		return
	}
	b.WriteByte(c)
}

// value reads a quoted or bare option value.
func (p *jaasLexer) value() (string, error) {
	p.space()
	if p.done() || p.peek() != '"' {
		v := p.word()
		if v == "" {
			return "", errors.New("empty value")
		}
		return v, nil
	}
	p.i++
	var b strings.Builder
	for !p.done() {
		c := p.peek()
		p.i++
		switch {
		case c == '"':
			return b.String(), nil
		case c == '\\' && !p.done():
			p.escape(&b)
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("unterminated quoted value")
}

// jaasOptions returns sasl.jaas.config's entry, nil when the property is empty.
func (c *Config) jaasOptions() (*jaasEntry, error) {
	if strings.TrimSpace(c.SASLJAASConfig) == "" {
		return nil, nil
	}
	return parseJAAS(c.SASLJAASConfig)
}

// jaasOption is one option of sasl.jaas.config's entry for module, "" when absent or invalid
// (Validate reports an invalid one).
func (c *Config) jaasOption(module, key string) string {
	e, err := c.jaasOptions()
	if err != nil || e == nil || e.module != module {
		return ""
	}
	return e.options[key]
}

// saslUsername and saslPassword are sasl.username and sasl.password, else the PLAIN or SCRAM
// login module's username and password in sasl.jaas.config (as a Java client has them).
func (c *Config) saslUsername() string {
	return firstNonEmpty(c.SASLUsername, c.jaasOption(c.credentialsModule(), "username"))
}

func (c *Config) saslPassword() string {
	return firstNonEmpty(c.SASLPassword, c.jaasOption(c.credentialsModule(), "password"))
}

// credentialsModule is the login module that carries sasl.mechanism's credentials.
func (c *Config) credentialsModule() string {
	switch strings.ToUpper(c.SASLMechanism) {
	case "PLAIN":
		return jaasPlainModule
	case "SCRAM-SHA-256", "SCRAM-SHA-512":
		return jaasScramModule
	case mskiam.Mechanism:
		return mskiam.LoginModule
	case kerberos.Mechanism:
		return kerberos.LoginModule
	}
	return jaasOAuthBearerModule
}

// validateJAAS checks sasl.jaas.config and sasl.login.callback.handler.class against
// sasl.mechanism.
func (c *Config) validateJAAS(bad func(key, format string, args ...any)) {
	if h := c.SASLLoginCallbackHandlerClass; h != "" && !knownLoginCallbackHandlers[h] {
		bad("sasl.login.callback.handler.class", "only Kafka's OAuthBearerLoginCallbackHandler and AWS's IAMOAuthBearerLoginCallbackHandler are understood (the producer makes tokens itself), got %q", h)
	}
	e, err := c.jaasOptions()
	if err != nil {
		bad("sasl.jaas.config", "%v", err)
		return
	}
	if e == nil {
		return
	}
	if want := c.credentialsModule(); e.module != want {
		bad("sasl.jaas.config", "sasl.mechanism=%s takes the login module %s, got %s", c.SASLMechanism, want, e.module)
		return
	}
	for k := range e.options {
		if strings.HasPrefix(k, "unsecuredLogin") {
			bad("sasl.jaas.config", "unsecured OAUTHBEARER tokens (%s) are not supported; use sasl.oauthbearer.token.endpoint.url", k)
		}
	}
}
