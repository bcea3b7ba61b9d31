package linerecord

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kafkatrail/kafkatrail/filetail"
)

// streamNames are the streams' names as bytes, so that {log.iostream} allocates nothing.
var streamNames = [...][]byte{filetail.StreamUnknown: nil, filetail.StreamStdout: []byte("stdout"), filetail.StreamStderr: []byte("stderr")}

// template is a compiled --topic or --header value: literal text with {name} parts taken from
// each line. A name is, in this order of precedence:
//
//   - a part of the line's source: {host}, {file.name} (the file's base name, app.log) or
//     {file.dir} (the base name of the directory it is in, nginx for /var/log/nginx/a.log);
//     any other file.* name is an error; of a container's log (podMeta), {k8s.namespace.name},
//     {k8s.pod.name}, {k8s.pod.uid}, {k8s.container.name}, {k8s.container.restart_count},
//     {container.id}, and {log.iostream} (stdout or stderr); any other k8s.* name is an error;
//   - a named group of --parse-regex, (?P<service>...);
//   - a JSON field of the line, a dotted path for a nested field (lineFields).
//
// Braces cannot be escaped: a Kafka topic name cannot hold one, and a header value that needs
// one is static enough to be set by the application. Templates are compiled once, when the
// agent starts; expanding one appends to a caller's buffer and allocates nothing itself.
type template struct {
	text  string // as configured
	parts []templatePart
}

type partKind uint8

const (
	partLiteral      partKind = iota
	partField                 // a JSON field of the line, by dotted path
	partGroup                 // a named group of --parse-regex
	partHost                  // the agent's host name
	partFileName              // the source file's base name
	partFileDir               // the base name of the source file's directory
	partK8sNamespace          // the container log's pod's namespace (podMeta)
	partK8sPod                // its pod's name
	partK8sUID                // its pod's uid
	partK8sContainer          // its container's name
	partK8sRestart            // its container's restart count
	partContainerID           // its container's id
	partStream                // the stream the container wrote the line to
)

type templatePart struct {
	kind  partKind
	text  string // the literal, or the name between the braces
	group int    // partGroup: the group's index in --parse-regex
}

// sourceParts are the names a template takes from the line's source rather than the line.
var sourceParts = map[string]partKind{
	"host": partHost, "file.name": partFileName, "file.dir": partFileDir,
	templateK8sNS: partK8sNamespace, templateK8sPod: partK8sPod, templateK8sUID: partK8sUID,
	templateK8sCont: partK8sContainer, templateK8sRestart: partK8sRestart, templateContainerID: partContainerID,
	templateStream: partStream,
}

// parseTemplate compiles text, the value of key; re is --parse-regex (nil when unset). Errors
// are ConfigErrors naming key: an unclosed or stray brace, an empty name, an unknown source part
// or a malformed field path.
func parseTemplate(key, text string, re *regexp.Regexp) (*template, error) {
	bad := func(format string, args ...any) error {
		return &ConfigError{Key: key, Reason: fmt.Sprintf("template %q: ", text) + fmt.Sprintf(format, args...)}
	}
	t := &template{text: text}
	for rest := text; rest != ""; {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			t.parts = append(t.parts, templatePart{kind: partLiteral, text: rest})
			break
		}
		if rest[open] == '}' {
			return nil, bad("'}' without a '{' before it")
		}
		if open > 0 {
			t.parts = append(t.parts, templatePart{kind: partLiteral, text: rest[:open]})
		}
		end := strings.IndexAny(rest[open+1:], "{}")
		if end < 0 || rest[open+1+end] == '{' {
			return nil, bad("unclosed '{'")
		}
		name := rest[open+1 : open+1+end]
		rest = rest[open+1+end+1:]
		p, err := resolvePart(name, re)
		if err != "" {
			return nil, bad("%s", err)
		}
		t.parts = append(t.parts, p)
	}
	return t, nil
}

// resolvePart says what {name} stands for (see template), or why it is wrong.
func resolvePart(name string, re *regexp.Regexp) (templatePart, string) {
	switch {
	case name == "":
		return templatePart{}, "empty name in {}: want a JSON field, a --parse-regex group, {host}, {file.name} or {file.dir}"
	case strings.TrimSpace(name) != name:
		return templatePart{}, fmt.Sprintf("{%s}: a name has no spaces around it", name)
	}
	if k, ok := sourceParts[name]; ok {
		return templatePart{kind: k, text: name}, ""
	}
	if strings.HasPrefix(name, "file.") {
		return templatePart{}, fmt.Sprintf("{%s}: unknown source part (known: {file.name}, {file.dir}, {host})", name)
	}
	if strings.HasPrefix(name, "k8s.") {
		return templatePart{}, fmt.Sprintf("{%s}: unknown Kubernetes part (known: {%s}, {%s}, {%s}, {%s}, {%s})",
			name, templateK8sNS, templateK8sPod, templateK8sUID, templateK8sCont, templateK8sRestart)
	}
	if re != nil {
		if i := re.SubexpIndex(name); i > 0 {
			return templatePart{kind: partGroup, text: name, group: i}, ""
		}
	}
	for _, seg := range strings.Split(name, ".") {
		if seg == "" {
			return templatePart{}, fmt.Sprintf("{%s}: a field path has an empty part (want a or a.b)", name)
		}
	}
	return templatePart{kind: partField, text: name}, ""
}

// static reports whether t has no part taken from the line: its value is its text.
func (t *template) static() bool {
	for _, p := range t.parts {
		if p.kind != partLiteral {
			return false
		}
	}
	return true
}

// lineSource is what a template reads for one line: the line's JSON view, its --parse-regex
// match (found at the first group asked for) and its source. It belongs to a Builder.
type lineSource struct {
	line    []byte
	fields  *lineFields
	re      *regexp.Regexp
	match   []int // FindSubmatchIndex of line; nil: no match (or not looked for yet)
	matched bool  // match is computed
	host    []byte
	pod     *podMeta        // the source's container, nil if it is not a container log
	stream  filetail.Stream // the stream the container wrote the line to

	// path, name and dir cache the last source path's parts, so that expanding a file part
	// costs no allocation per line.
	path      string
	name, dir []byte
}

// reset makes s the source of line read from path ("" for stdin).
func (s *lineSource) reset(line []byte, path string, fields *lineFields) {
	s.line, s.fields, s.match, s.matched = line, fields, nil, false
	if path != s.path {
		s.path, s.name, s.dir = path, nil, nil
		if path != "" {
			s.name = []byte(filepath.Base(path))
			s.dir = []byte(filepath.Base(filepath.Dir(path)))
		}
	}
}

// value returns what part p stands for in this line; ok is false when the line has no such
// value (a missing, null, non-scalar or empty field, a group that did not match, a file part of
// a line read from stdin).
func (s *lineSource) value(p *templatePart) (v []byte, ok bool) {
	switch p.kind {
	case partField:
		v, ok = s.fields.scalar(p.text)
	case partGroup:
		if !s.matched {
			s.matched = true
			s.match = s.re.FindSubmatchIndex(s.line)
		}
		if m := s.match; m != nil && m[2*p.group] >= 0 {
			v, ok = s.line[m[2*p.group]:m[2*p.group+1]], true
		}
	case partHost:
		v, ok = s.host, true
	case partFileName:
		v, ok = s.name, true
	case partFileDir:
		v, ok = s.dir, true
	case partK8sNamespace, partK8sPod, partK8sUID, partK8sContainer, partK8sRestart, partContainerID:
		v, ok = s.pod.field(p.kind), true
	case partStream:
		v, ok = streamNames[s.stream], true
	}
	return v, ok && len(v) > 0
}

// expand appends t's value for the line of s to dst. When a part has no value it returns dst
// unchanged and that part's name as missing.
func (t *template) expand(dst []byte, s *lineSource) (out []byte, missing string) {
	start := len(dst)
	for i := range t.parts {
		p := &t.parts[i]
		if p.kind == partLiteral {
			dst = append(dst, p.text...)
			continue
		}
		v, ok := s.value(p)
		if !ok {
			return dst[:start], p.text
		}
		dst = append(dst, v...)
	}
	return dst, ""
}

// maxTopicNameLength is the longest legal topic name (Topic.MAX_NAME_LENGTH).
const maxTopicNameLength = 249

// topicNameProblem says why name is not a legal Kafka topic name, "" if it is one. It mirrors
// org.apache.kafka.common.internals.Topic.detectInvalidTopic (what Topic.validate checks), so
// a name the agent accepts is one the broker accepts.
func topicNameProblem[T string | []byte](name T) string {
	switch {
	case len(name) == 0:
		return "the empty string is not allowed"
	case string(name) == ".":
		return "'.' is not allowed"
	case string(name) == "..":
		return "'..' is not allowed"
	case len(name) > maxTopicNameLength:
		return fmt.Sprintf("it is longer than the max allowed length %d", maxTopicNameLength)
	}
	for i := 0; i < len(name); i++ {
		if !legalTopicChar(name[i]) {
			return "it contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
		}
	}
	return ""
}

// legalTopicChar is Topic.containsValidPattern's test: [a-zA-Z0-9._-].
func legalTopicChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
