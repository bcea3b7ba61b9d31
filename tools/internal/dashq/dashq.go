// Package dashq reads the checked-in Grafana dashboards (dashboards/*.json) generically and
// lists what they ask of the datasources: every PromQL expression (panel queries and
// label_values variables) and every Jaeger search, with Grafana's variables substituted so
// that a test can run them against a real Prometheus or Jaeger.
package dashq

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
)

// Query is one datasource query of a dashboard.
type Query struct {
	File      string // dashboards/<File>
	Panel     string // panel title, or "variable NAME"
	PanelType string // timeseries, stat, heatmap, table, ... ("variable" for a variable)
	RefID     string
	Type      string // "prometheus" or "jaeger"
	Expr      string // PromQL as written (prometheus)
	Exemplar  bool   // the panel shows exemplars
	// label_values(SELECTOR, LABEL) variables: the selector and label.
	VarSelector, VarLabel string
	// Jaeger searches: service and operation as written.
	Service, Operation string
}

func (q Query) String() string {
	s := fmt.Sprintf("%s / %s", q.File, q.Panel)
	if q.RefID != "" {
		s += " / " + q.RefID
	}
	return s
}

type panel struct {
	Title      string          `json:"title"`
	Type       string          `json:"type"`
	Datasource *datasource     `json:"datasource"`
	Targets    []target        `json:"targets"`
	Panels     []panel         `json:"panels"`
	Raw        json.RawMessage `json:"-"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type target struct {
	RefID      string      `json:"refId"`
	Expr       string      `json:"expr"`
	Exemplar   bool        `json:"exemplar"`
	Datasource *datasource `json:"datasource"`
	QueryType  string      `json:"queryType"`
	Service    string      `json:"service"`
	Operation  string      `json:"operation"`
}

type dash struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

var labelValues = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// Load lists the queries of every dashboards/*.json in dir.
func Load(dir string) ([]Query, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no dashboards in %s", dir)
	}
	sort.Strings(files)
	var out []Query
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var d dash
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		name := filepath.Base(f)
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			var s string
			if err := json.Unmarshal(v.Query, &s); err != nil {
				return nil, fmt.Errorf("%s: variable %s: query is not a string", name, v.Name)
			}
			m := labelValues.FindStringSubmatch(strings.TrimSpace(s))
			if m == nil {
				return nil, fmt.Errorf("%s: variable %s: not label_values(SELECTOR, LABEL): %s", name, v.Name, s)
			}
			out = append(out, Query{File: name, Panel: "variable " + v.Name, PanelType: "variable", Type: "prometheus",
				Expr: m[1], VarSelector: m[1], VarLabel: m[2]})
		}
		var walk func(ps []panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				walk(p.Panels)
				for _, t := range p.Targets {
					ds := t.Datasource
					if ds == nil {
						ds = p.Datasource
					}
					typ := ""
					if ds != nil {
						typ = ds.Type
					}
					q := Query{File: name, Panel: p.Title, PanelType: p.Type, RefID: t.RefID, Type: typ}
					switch typ {
					case "prometheus":
						q.Expr, q.Exemplar = t.Expr, t.Exemplar
					case "jaeger":
						q.Service, q.Operation = t.Service, t.Operation
					}
					out = append(out, q)
				}
			}
		}
		walk(d.Panels)
	}
	return out, nil
}

// Vars are the values a test gives Grafana's variables: every dashboard variable matches
// anything (its "All" value), $__rate_interval and friends are a fixed window.
type Vars struct {
	RateInterval string            // $__rate_interval, $__interval, $__range: "1m" by default
	Values       map[string]string // $name and ${name}; default ".*"
}

var varRef = regexp.MustCompile(`\$\{([a-zA-Z_][a-zA-Z0-9_]*)(?::[a-z]+)?\}|\$([a-zA-Z_][a-zA-Z0-9_]*)`)

// Substitute replaces Grafana's variables in a PromQL expression or a Jaeger field.
func (v Vars) Substitute(s string) string {
	ri := v.RateInterval
	if ri == "" {
		ri = "1m"
	}
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		sm := varRef.FindStringSubmatch(m)
		name := sm[1] + sm[2]
		switch name {
		case "__rate_interval", "__interval", "__range", "__range_s":
			return ri
		}
		if val, ok := v.Values[name]; ok {
			return val
		}
		return ".*"
	})
}

// OwnSeries returns the part of a PromQL expression that reads the panel's own series when
// the expression ends in a zero fallback, `EXPR or [on (...)] (0 * ...)` (the dashboards'
// orZero: a counter's panel reads 0 before the counter's first event), and ok false for an
// expression without one. A test that injects faults runs EXPR alone, to see that the faults
// move the counter and not only its zero.
func OwnSeries(expr string) (own string, ok bool, err error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return "", false, err
	}
	or, isOr := e.(*parser.BinaryExpr)
	if !isOr || or.Op != parser.LOR {
		return expr, false, nil
	}
	rhs := or.RHS
	if p, isParen := rhs.(*parser.ParenExpr); isParen {
		rhs = p.Expr
	}
	mul, isMul := rhs.(*parser.BinaryExpr)
	if !isMul || mul.Op != parser.MUL {
		return expr, false, nil
	}
	if zero, isNum := mul.LHS.(*parser.NumberLiteral); !isNum || zero.Val != 0 {
		return expr, false, nil
	}
	return or.LHS.String(), true, nil
}
