package linerecord

import (
	"bytes"
	"regexp"
	"regexp/syntax"
	"strings"
)

// Why Build left a line out: the values of kafkatrail.reason on kafkatrail.agent.lines.dropped.
const (
	FilteredNotIncluded = "not_included" // the line matches none of include-lines
	FilteredExcluded    = "excluded"     // the line matches one of exclude-lines
)

// Filtered is Build's error for a line that include-lines or exclude-lines leave out: it is not
// sent, and counted under Reason.
type Filtered struct{ Reason string }

func (f *Filtered) Error() string { return "line left out: " + f.Reason }

// Build's errors for a filtered line, one per reason: a dropped line allocates nothing.
var (
	errNotIncluded = &Filtered{Reason: FilteredNotIncluded}
	errExcluded    = &Filtered{Reason: FilteredExcluded}
)

// DefaultRedactReplacement replaces a redact pattern's match when the rule names no
// replacement.
const DefaultRedactReplacement = "[REDACTED]"

// Redaction is a redact rule: every match of Pattern in a line is replaced by Replacement
// (regexp.Expand's template: $1 or ${name} is a group of the match, $$ a dollar sign) before the
// line is routed, keyed and sent.
type Redaction struct {
	Pattern     string `koanf:"pattern"`
	Replacement string `koanf:"replacement"`
}

// redactArrow separates a rule's pattern from its replacement in the text form.
const redactArrow = "=>"

// UnmarshalText reads a rule's text form, as a flag or the environment gives it: PATTERN, whose
// matches become DefaultRedactReplacement, or PATTERN=>REPLACEMENT.
func (r *Redaction) UnmarshalText(text []byte) error {
	p, repl, ok := strings.Cut(string(text), redactArrow)
	if !ok {
		repl = DefaultRedactReplacement
	}
	*r = Redaction{Pattern: p, Replacement: repl}
	return nil
}

// String is the rule's text form.
func (r Redaction) String() string { return r.Pattern + redactArrow + r.Replacement }

// filter is an input's include-lines, exclude-lines and redact rules, compiled: shared by its
// builders (a regexp is safe for concurrent use).
type filter struct {
	include, exclude []matcher
	redact           []redactor
}

// matcher is a pattern with what a line must hold for it to match: lines without it are
// answered by one substring search, not by the regular expression (most lines of a log match
// none of its filters).
type matcher struct {
	re *regexp.Regexp
	// literal, when set, is a substring of every match; whole says the pattern is exactly
	// that literal, so holding it is matching.
	literal []byte
	whole   bool
}

func newMatcher(re *regexp.Regexp) matcher {
	m := matcher{re: re}
	if lit, whole := requiredLiteral(re.String()); lit != "" {
		m.literal, m.whole = []byte(lit), whole
	}
	return m
}

func (m *matcher) match(line []byte) bool {
	if m.literal != nil {
		if !bytes.Contains(line, m.literal) {
			return false
		}
		if m.whole {
			return true
		}
	}
	return m.re.Match(line)
}

// redactor is a compiled redact rule.
type redactor struct {
	matcher
	replacement []byte
}

// requiredLiteral returns a string every match of pattern contains, the longest it can tell
// from the pattern's syntax ("" if none: an alternation, a case-insensitive literal, a class),
// and whether the pattern is exactly that string.
func requiredLiteral(pattern string) (lit string, whole bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	re = re.Simplify()
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return "", false
		}
		return string(re.Rune), true
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			for sub.Op == syntax.OpCapture {
				sub = sub.Sub[0]
			}
			if sub.Op == syntax.OpLiteral && sub.Flags&syntax.FoldCase == 0 && len(string(sub.Rune)) > len(lit) {
				lit = string(sub.Rune)
			}
		}
	}
	return lit, false
}

// compileFilter compiles c's filters, nil when it has none; bad reports each error under its
// key.
func compileFilter(c *Config, bad func(key, format string, args ...any)) *filter {
	f := &filter{}
	compile := func(key string, patterns []string) []matcher {
		var out []matcher
		for _, p := range patterns {
			re, err := regexp.Compile(p)
			if err != nil {
				bad(key, "%q: %v", p, err)
				continue
			}
			out = append(out, newMatcher(re))
		}
		return out
	}
	f.include = compile("include-lines", c.IncludeLines)
	f.exclude = compile("exclude-lines", c.ExcludeLines)
	for _, r := range c.Redact {
		re, err := regexp.Compile(r.Pattern)
		switch {
		case err != nil:
			bad("redact", "%q: %v", r.Pattern, err)
			continue
		case r.Pattern == "" || re.MatchString(""):
			bad("redact", "%q matches the empty string: it would insert its replacement everywhere", r.Pattern)
			continue
		}
		f.redact = append(f.redact, redactor{matcher: newMatcher(re), replacement: []byte(r.Replacement)})
	}
	if len(f.include) == 0 && len(f.exclude) == 0 && len(f.redact) == 0 {
		return nil
	}
	return f
}

// keep returns nil when line passes include-lines (any one matches; all lines when there are
// none) and then exclude-lines (none matches), Filebeat's order; else why it is left out.
func (f *filter) keep(line []byte) *Filtered {
	if len(f.include) > 0 {
		in := false
		for i := range f.include {
			if f.include[i].match(line) {
				in = true
				break
			}
		}
		if !in {
			return errNotIncluded
		}
	}
	for i := range f.exclude {
		if f.exclude[i].match(line) {
			return errExcluded
		}
	}
	return nil
}

// redactLine applies every redact rule to line, in order, and returns the result and whether a
// rule matched: line itself when none did, else the redacted text in buf's storage (*buf keeps it for the next
// line, unless a long line grew it past keptBufferBytes). Each rule sees what the rules before
// it made.
func (f *filter) redactLine(line []byte, buf *[2][]byte) ([]byte, bool) {
	for i := range buf {
		if cap(buf[i]) > keptBufferBytes {
			buf[i] = nil // the last line's record was sent (Send copies it)
		}
	}
	out, changed := line, false
	n := 0 // which of buf's halves out is in, once it is in one
	for i := range f.redact {
		r := &f.redact[i]
		if r.literal != nil && !bytes.Contains(out, r.literal) {
			continue
		}
		matches := r.re.FindAllSubmatchIndex(out, -1)
		if matches == nil {
			continue
		}
		dst := buf[n][:0]
		last := 0
		for _, m := range matches {
			dst = append(dst, out[last:m[0]]...)
			dst = r.re.Expand(dst, r.replacement, out, m)
			last = m[1]
		}
		dst = append(dst, out[last:]...)
		buf[n] = dst
		out = dst
		n ^= 1
		changed = true
	}
	return out, changed
}
