package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// The datasources, as variables: a user importing a dashboard picks their own; the
// provisioning in dashboards/provisioning/ creates these two with the default UIDs.
const (
	PrometheusUID = "kafkatrail-prometheus"
	JaegerUID     = "kafkatrail-jaeger"
)

var (
	promDS   = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}
	jaegerDS = common.DataSourceRef{Type: cog.ToPtr("jaeger"), Uid: cog.ToPtr("${jaeger}")}
)

// File is one generated dashboard: dashboards/<Name>.json.
type File struct {
	Name string
	JSON []byte
}

// Generate builds every dashboard from the names in telemetry/names.go.
func Generate(n *Names) ([]File, error) {
	builders := []struct {
		name string
		b    *dashboard.DashboardBuilder
	}{
		{"producer-overview", producerOverview(n)},
		{"network-inflight", networkInflight(n)},
		{"agent-files", agentFiles(n)},
	}
	if err := n.Err(); err != nil {
		return nil, err
	}
	var out []File
	for _, b := range builders {
		d, err := b.b.Build()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.name, err)
		}
		number(&d)
		js, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", b.name, err)
		}
		out = append(out, File{Name: b.name + ".json", JSON: append(js, '\n')})
	}
	return out, nil
}

// number gives every panel and row a unique id (1, 2, ...) and every query a refId (A, B,
// ...) within its panel, as Grafana would on save.
func number(d *dashboard.Dashboard) {
	id := uint32(0)
	panel := func(p *dashboard.Panel) {
		id++
		p.Id = cog.ToPtr(id)
		for i, t := range p.Targets {
			ref := string(rune('A' + i))
			switch t := t.(type) {
			case *prometheus.Dataquery:
				if t.RefId == nil {
					t.RefId = cog.ToPtr(ref)
				}
			case prometheus.Dataquery:
				if t.RefId == nil {
					t.RefId = cog.ToPtr(ref)
				}
				p.Targets[i] = t
			case variants.UnknownDataquery:
				t["refId"] = ref
			default:
				panic(fmt.Sprintf("number: unexpected query type %T", t))
			}
		}
	}
	for _, pr := range d.Panels {
		if pr.RowPanel != nil {
			id++
			pr.RowPanel.Id = id
			for i := range pr.RowPanel.Panels {
				panel(&pr.RowPanel.Panels[i])
			}
		}
		if pr.Panel != nil {
			panel(pr.Panel)
		}
	}
}

// --- shared pieces -------------------------------------------------------------------------

// sel is a PromQL label-matcher list built from pairs: sel("job", "$job", ...) ->
// `job=~"$job",...`. Every variable is matched with =~ so that "All" (.*) works.
func sel(pairs ...string) string {
	var parts []string
	for i := 0; i+1 < len(pairs); i += 2 {
		parts = append(parts, fmt.Sprintf(`%s=~"%s"`, pairs[i], pairs[i+1]))
	}
	return strings.Join(parts, ",")
}

func base(extra ...string) string {
	return sel(append([]string{"job", "$job", "instance", "$instance"}, extra...)...)
}

func q(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(expr).LegendFormat(legend).Range().Datasource(promDS)
}

// qx is a query whose exemplars are shown (latency: a dot links to the trace in Jaeger).
func qx(expr, legend string) *prometheus.DataqueryBuilder { return q(expr, legend).Exemplar(true) }

func rate(metric, matchers string) string {
	return fmt.Sprintf("rate(%s{%s}[$__rate_interval])", metric, matchers)
}

// quantile is histogram_quantile over a histogram's buckets, grouped by le and `by`.
func quantile(phi float64, hist, matchers string, by ...string) string {
	return fmt.Sprintf("histogram_quantile(%g, sum by (%s) (%s))", phi,
		strings.Join(append([]string{"le"}, by...), ", "), rate(hist+"_bucket", matchers))
}

// mean is a histogram's mean over the rate interval.
func mean(hist, matchers string, by ...string) string {
	g := ""
	if len(by) > 0 {
		g = " by (" + strings.Join(by, ", ") + ")"
	}
	return fmt.Sprintf("sum%s (%s) / sum%s (%s)", g, rate(hist+"_sum", matchers), g, rate(hist+"_count", matchers))
}

// orZero makes a query over a counter that only has series after its first event (failed and
// retried records, connection closes and failures, long and dropped lines) read 0 on a healthy
// agent instead of Grafana's "No data": expr, or else 0 for each group of the labels by (none:
// one 0) that anchor has, a selector of a metric whose series exist whenever the panel's
// subject does (the records sent per topic, the connection state per known node, the watched
// files and stdin).
//
// Why in the query and not by giving the counters a value from the start: most of these series
// are keyed by an error.type or a drop reason, which is not known before the event (a 0 without
// it would be a series of its own, an empty legend entry beside the real ones); and a query fixes
// the panel for agents already deployed too. The zero is anchored rather than vector(0), so that
// an agent that is not there, or a topic, node or file filter that matches nothing, still reads
// "No data". `or on (by)` keeps a group's real series and adds a 0 only to groups that have none:
// a topic with failures of one error.type shows those, with no extra 0 line.
func orZero(expr, anchor string, by ...string) string {
	if len(by) == 0 {
		return fmt.Sprintf("%s or (0 * group(%s))", expr, anchor)
	}
	g := strings.Join(by, ", ")
	return fmt.Sprintf("%s or on (%s) (0 * group by (%s) (%s))", expr, g, g, anchor)
}

func legend(labels ...string) string {
	var parts []string
	for _, l := range labels {
		parts = append(parts, "{{"+l+"}}")
	}
	return strings.Join(parts, " ")
}

func ts(title, desc, unit string, w, h uint32) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().Title(title).Description(desc).Unit(unit).
		Span(w).Height(h).Datasource(promDS).
		LineWidth(1).FillOpacity(10).ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
}

func stacked(p *timeseries.PanelBuilder) *timeseries.PanelBuilder {
	return p.Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).FillOpacity(40)
}

func statPanel(title, desc, unit string, expr string) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title(title).Description(desc).Unit(unit).Span(6).Height(4).
		Datasource(promDS).WithTarget(q(expr, "").Instant()).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		GraphMode(common.BigValueGraphModeArea)
}

// latencyHeatmap shows a histogram's buckets over time, with exemplars.
func latencyHeatmap(title, desc, hist, matchers string, w uint32) *heatmap.PanelBuilder {
	return heatmap.NewPanelBuilder().Title(title).Description(desc).Span(w).Height(8).
		Datasource(promDS).
		WithTarget(prometheus.NewDataqueryBuilder().Datasource(promDS).
			Expr(fmt.Sprintf("sum by (le) (increase(%s_bucket{%s}[$__rate_interval]))", hist, matchers)).
			Format(prometheus.PromQueryFormatHeatmap).LegendFormat("{{le}}").Range().Exemplar(true)).
		Calculate(false).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit("s")).
		Color(heatmap.NewHeatmapColorOptionsBuilder().Mode(heatmap.HeatmapColorModeScheme).
			Scheme("Oranges").Scale(heatmap.HeatmapColorScaleExponential).Exponent(0.5).Steps(64)).
		CellGap(1).
		ExemplarsColor("rgba(255,0,255,0.7)").
		ShowValue(common.VisibilityModeNever)
}

// jaegerSearch is a Jaeger datasource search (Grafana's Jaeger query model). The SDK has no
// Jaeger types; an UnknownDataquery (a map) is what it unmarshals such a query into.
type jaegerSearchBuilder struct{ q variants.UnknownDataquery }

func (b *jaegerSearchBuilder) Build() (variants.Dataquery, error) { return b.q, nil }

func jaegerSearch(service, operation string, limit int) *jaegerSearchBuilder {
	q := variants.UnknownDataquery{"refId": "A", "queryType": "search", "service": service,
		"limit": limit, "datasource": jaegerDS}
	if operation != "" {
		q["operation"] = operation
	}
	return &jaegerSearchBuilder{q}
}

func tracesTable(title, desc string, operation string) *table.PanelBuilder {
	return table.NewPanelBuilder().Title(title).Description(desc).Span(24).Height(8).
		Datasource(jaegerDS).WithTarget(jaegerSearch("$service", operation, 20)).
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{"count"}))
}

// vars are the variables every dashboard has: the two datasources, the job (OTLP
// service.name), the instance (service.instance.id) and the Jaeger service.
func vars(d *dashboard.DashboardBuilder, n *Names, anchor string) *dashboard.DashboardBuilder {
	return d.
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Prometheus").
			Type("prometheus").Current(dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: cog.ToPtr("Prometheus")},
			Value: dashboard.StringOrArrayOfString{String: cog.ToPtr(PrometheusUID)}})).
		WithVariable(dashboard.NewDatasourceVariableBuilder("jaeger").Label("Jaeger").
			Type("jaeger").Current(dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: cog.ToPtr("Jaeger")},
			Value: dashboard.StringOrArrayOfString{String: cog.ToPtr(JaegerUID)}})).
		WithVariable(queryVar("job", "Job (service.name)", fmt.Sprintf("label_values(%s, job)", anchor))).
		WithVariable(queryVar("instance", "Instance", fmt.Sprintf(`label_values(%s{job=~"$job"}, instance)`, anchor))).
		WithVariable(dashboard.NewTextBoxVariableBuilder("service").Label("Jaeger service").
			DefaultValue(dashboard.StringOrMap{String: cog.ToPtr(n.Const("DefaultServiceName"))}))
}

// filtered is a new dashboard (newDashboard) with the common variables (vars, anchored on the
// metric anchor) and one more, name (shown as label), that filters on the values of the label
// key of anchor.
func filtered(n *Names, anchor, name, label, key, title, uid, desc string) *dashboard.DashboardBuilder {
	return vars(newDashboard(title, uid, desc), n, anchor).
		WithVariable(queryVar(name, label, fmt.Sprintf(`label_values(%s{job=~"$job"}, %s)`, anchor, key)))
}

func queryVar(name, label, query string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).Label(label).
		Query(dashboard.StringOrMap{String: cog.ToPtr(query)}).Definition(query).
		Datasource(promDS).Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).Multi(true).IncludeAll(true).AllValue(".*")
}

func newDashboard(title, uid, desc string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).Uid(uid).Description(desc).
		Tags([]string{"kafkatrail", "kafka", "producer"}).
		Refresh("10s").Time("now-30m", "now").Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).Editable().
		Link(dashboard.NewDashboardLinkBuilder("kafkatrail").Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{"kafkatrail"}).AsDropdown(true).IncludeVars(true).KeepTime(true))
}
