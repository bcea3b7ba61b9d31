package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"sort"
	"strconv"

	"github.com/prometheus/otlptranslator"
)

// Names is the vocabulary of telemetry/names.go, read from its source so that the tools
// module does not depend on the root module (and its dependency versions): every constant's
// value, and every MetricDesc in telemetry.Metrics by the constant that names it.
//
// The dashboards name metrics and attributes by their Go constant (MetricStageDuration,
// AttrNodeID); a constant that does not exist, or a metric missing from telemetry.Metrics,
// is an error, so a rename in telemetry/ breaks the generator (and the staleness test)
// instead of leaving a dashboard that queries nothing.
type Names struct {
	consts  map[string]string
	metrics map[string]metricDesc // by constant name
	errs    []error
	used    map[string]bool
}

type metricDesc struct {
	Const string
	Name  string // OpenTelemetry name
	Kind  string // counter, histogram, gauge
	Unit  string
}

// LoadNames parses telemetry/names.go.
func LoadNames(path string) (*Names, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return nil, err
	}
	n := &Names{consts: map[string]string{}, metrics: map[string]metricDesc{}, used: map[string]bool{}}
	// Constants: string literals, or another constant (StageAppend = SpanAppend), or a
	// concatenation of those.
	var pending []*ast.ValueSpec
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			pending = append(pending, s.(*ast.ValueSpec))
		}
	}
	for progress := true; progress && len(pending) > 0; {
		progress = false
		var rest []*ast.ValueSpec
		for _, vs := range pending {
			done := true
			for i, id := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				if v, ok := n.eval(vs.Values[i]); ok {
					n.consts[id.Name] = v
				} else {
					done = false
				}
			}
			if done {
				progress = true
			} else {
				rest = append(rest, vs)
			}
		}
		pending = rest
	}
	// var Metrics = []MetricDesc{{MetricX, "histogram", "s", ...}, ...}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			if len(vs.Names) != 1 || vs.Names[0].Name != "Metrics" || len(vs.Values) != 1 {
				continue
			}
			lit, ok := vs.Values[0].(*ast.CompositeLit)
			if !ok {
				return nil, fmt.Errorf("%s: Metrics is not a composite literal", path)
			}
			for _, e := range lit.Elts {
				el, ok := e.(*ast.CompositeLit)
				if !ok || len(el.Elts) < 3 {
					return nil, fmt.Errorf("%s: unexpected Metrics element at %s", path, fset.Position(e.Pos()))
				}
				id, ok := el.Elts[0].(*ast.Ident)
				if !ok {
					return nil, fmt.Errorf("%s: a Metrics element does not start with a constant at %s", path, fset.Position(e.Pos()))
				}
				name, ok1 := n.consts[id.Name]
				kind, ok2 := n.eval(el.Elts[1])
				unit, ok3 := n.eval(el.Elts[2])
				if !ok1 || !ok2 || !ok3 {
					return nil, fmt.Errorf("%s: cannot read the Metrics element at %s", path, fset.Position(e.Pos()))
				}
				n.metrics[id.Name] = metricDesc{Const: id.Name, Name: name, Kind: kind, Unit: unit}
			}
		}
	}
	if len(n.metrics) == 0 {
		return nil, fmt.Errorf("%s: no Metrics table found", path)
	}
	return n, nil
}

func (n *Names) eval(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.Ident:
		v, ok := n.consts[e.Name]
		return v, ok
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		a, ok1 := n.eval(e.X)
		b, ok2 := n.eval(e.Y)
		return a + b, ok1 && ok2
	case *ast.ParenExpr:
		return n.eval(e.X)
	}
	return "", false
}

// Const returns the value of a string constant of package telemetry.
func (n *Names) Const(name string) string {
	v, ok := n.consts[name]
	if !ok {
		n.errs = append(n.errs, fmt.Errorf("telemetry.%s: no such constant in telemetry/names.go", name))
		return "MISSING_" + name
	}
	return v
}

// Label returns the Prometheus label name of the attribute named by a constant (AttrNodeID ->
// kafkatrail_node_id), as Prometheus's OTLP receiver translates it.
func (n *Names) Label(attrConst string) string {
	ln := otlptranslator.LabelNamer{}
	l, err := ln.Build(n.Const(attrConst))
	if err != nil {
		n.errs = append(n.errs, fmt.Errorf("telemetry.%s: %w", attrConst, err))
	}
	return l
}

// Metric returns the Prometheus name of the metric named by a constant, as Prometheus's OTLP
// receiver translates it (UnderscoreEscapingWithSuffixes): counters end in _total, units
// become suffixes. For a histogram it is the base name: add _bucket, _sum or _count.
func (n *Names) Metric(metricConst string) string {
	m, ok := n.metrics[metricConst]
	if !ok {
		n.Const(metricConst)
		n.errs = append(n.errs, fmt.Errorf("telemetry.%s: not in telemetry.Metrics", metricConst))
		return "MISSING_" + metricConst
	}
	n.used[metricConst] = true
	var t otlptranslator.MetricType
	switch m.Kind {
	case "counter":
		t = otlptranslator.MetricTypeMonotonicCounter
	case "histogram":
		t = otlptranslator.MetricTypeHistogram
	case "gauge":
		t = otlptranslator.MetricTypeGauge
	default:
		n.errs = append(n.errs, fmt.Errorf("telemetry.%s: unknown kind %q", metricConst, m.Kind))
	}
	namer := otlptranslator.NewMetricNamer("", otlptranslator.UnderscoreEscapingWithSuffixes)
	name, err := namer.Build(otlptranslator.Metric{Name: m.Name, Unit: m.Unit, Type: t})
	if err != nil {
		n.errs = append(n.errs, fmt.Errorf("telemetry.%s: %w", metricConst, err))
	}
	return name
}

// Unused lists the metrics of telemetry.Metrics that no dashboard shows.
func (n *Names) Unused() []string {
	var out []string
	for c, m := range n.metrics {
		if !n.used[c] {
			out = append(out, m.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Err reports every unknown name met so far.
func (n *Names) Err() error {
	if len(n.errs) == 0 {
		return nil
	}
	msg := ""
	for _, e := range n.errs {
		msg += "\n  " + e.Error()
	}
	return fmt.Errorf("dashboards refer to names that telemetry/names.go does not define:%s", msg)
}
