package telemetry

import (
	"context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
)

// lateResource is the process's resource, and once the broker assigned the producer a client
// instance id (KIP-714), the same with AttrClientInstanceID: the SDK's providers fix their
// resource when they are built, long before the id arrives, so kafkatrail's own exporters ask
// for it at each export instead. With the id in the resource, the broker's client metrics
// (labelled client_instance_id) join the agent's traces and metrics on one value.
type lateResource struct {
	base *resource.Resource
	id   atomic.Pointer[func() string] // set by Provider.WatchClientInstance

	mu     sync.Mutex
	lastID string
	withID *resource.Resource
}

func newLateResource(base *resource.Resource) *lateResource { return &lateResource{base: base} }

// watch makes current ask id for the client instance id.
func (l *lateResource) watch(id func() string) { l.id.Store(&id) }

// current returns the resource to export with: base until the id is known, then base with it.
// It returns the same pointer while the id does not change, so an exporter encodes it once.
func (l *lateResource) current() *resource.Resource {
	f := l.id.Load()
	if f == nil {
		return l.base
	}
	id := (*f)()
	if id == "" {
		return l.base
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if id != l.lastID {
		// Merge cannot fail here: the id resource has no schema URL to conflict with base's.
		res, err := resource.Merge(l.base, resource.NewSchemaless(attribute.String(AttrClientInstanceID, id)))
		if err != nil {
			return l.base
		}
		l.lastID, l.withID = id, res
	}
	return l.withID
}

// lateResourceMetricExporter exports metrics with the lateResource's current resource in
// place of the one the meter provider was built with.
type lateResourceMetricExporter struct {
	sdkmetric.Exporter
	res *lateResource
}

func withLateResource(exp sdkmetric.Exporter, res *lateResource) sdkmetric.Exporter {
	if res == nil {
		return exp
	}
	return lateResourceMetricExporter{Exporter: exp, res: res}
}

// Export sets rm's resource: the reader fills rm afresh at every collection, so the change
// lasts for this export only.
func (e lateResourceMetricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	rm.Resource = e.res.current()
	return e.Exporter.Export(ctx, rm)
}
