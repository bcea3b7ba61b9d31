package deploy

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// fullValues turns every option on: SASL and TLS from Secrets, OTLP export, the ServiceMonitor,
// extra env, volumes and mounts, pull secrets, scheduling, and a config of the user's.
const fullValues = `
image:
  tag: 0.1.0-rc1
imagePullSecrets:
  - name: ghcr
serviceAccount:
  annotations:
    team: platform
config:
  brokers: [kafka-0.kafka.kafka.svc:9093, kafka-1.kafka.kafka.svc:9093]
  tail: [/var/log/containers/*.log, /srv/logs/*.log]
  shutdown-timeout: 1m30s
  max-lines-per-second: 20000
  producer:
    linger.ms: 10
sasl:
  existingSecret: kafka-user
  mechanism: SCRAM-SHA-256
tls:
  existingSecret: kafka-cluster-ca
  clientCertificate: true
otel:
  endpoint: http://otel-collector.observability.svc:4317
  protocol: grpc
securityContext:
  fsGroup: 2000
  supplementalGroups: [4]
priorityClassName: system-node-critical
nodeSelector:
  kubernetes.io/os: linux
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: kubernetes.io/arch, operator: In, values: [amd64, arm64]}
podAnnotations:
  team: platform
podLabels:
  team: platform
extraEnv:
  - name: KAFKATRAIL_TRANSACTIONAL_ID
    value: kafkatrail-$(NODE_NAME)
  - name: OTEL_SERVICE_NAME
    value: kafkatrail-agent
extraVolumes:
  - name: srv-logs
    hostPath:
      path: /srv/logs
      type: Directory
extraVolumeMounts:
  - name: srv-logs
    mountPath: /srv/logs
    readOnly: true
serviceMonitor:
  enabled: true
  labels:
    release: prometheus
`

// parseValues reads values given as YAML, as `helm -f` does.
func parseValues(t *testing.T, doc string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("values: %v", err)
	}
	return v
}

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor (monitoring.coreos.com/v1)
// that the chart writes; decoded strictly, so any other field is an error. The field names are
// the CRD's.
type serviceMonitor struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
			Relabelings   []struct {
				SourceLabels []string `json:"sourceLabels"`
				TargetLabel  string   `json:"targetLabel"`
			} `json:"relabelings"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// objects are the rendered manifests, each decoded strictly into its type.
type objects struct {
	daemonSet      *appsv1.DaemonSet
	configMap      *corev1.ConfigMap
	serviceAccount *corev1.ServiceAccount
	service        *corev1.Service
	serviceMonitor *serviceMonitor
	rendered       Rendered
}

// agentYAML is the ConfigMap's agent.yaml, decoded.
func (o objects) agentYAML(t *testing.T) map[string]any {
	t.Helper()
	var cfg map[string]any
	if err := yaml.UnmarshalStrict([]byte(o.configMap.Data["agent.yaml"]), &cfg); err != nil {
		t.Fatalf("agent.yaml: %v", err)
	}
	return cfg
}

// container is the DaemonSet's one container.
func (o objects) container(t *testing.T) corev1.Container {
	t.Helper()
	cs := o.daemonSet.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "agent" {
		t.Fatalf("want one container named agent, got %d", len(cs))
	}
	return cs[0]
}

// decodeStrict decodes one manifest into out as the API server does with
// fieldValidation=Strict: field names match by case, and an unknown field or a field given
// twice is an error (encoding/json alone would take readonly for readOnly).
func decodeStrict(content string, out any) error {
	js, err := yaml.YAMLToJSONStrict([]byte(content))
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(js, out, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// decodeAll decodes every manifest into the type its apiVersion and kind name; a kind the
// chart is not meant to make, or two objects of one kind, is an error.
func decodeAll(r Rendered) (objects, error) {
	o := objects{rendered: r}
	for _, m := range r.Manifests {
		var target any
		switch gvk := m.Version + "/" + m.Kind; gvk {
		case "apps/v1/DaemonSet":
			if o.daemonSet != nil {
				return o, fmt.Errorf("two DaemonSets")
			}
			o.daemonSet = new(appsv1.DaemonSet)
			target = o.daemonSet
		case "v1/ConfigMap":
			if o.configMap != nil {
				return o, fmt.Errorf("two ConfigMaps")
			}
			o.configMap = new(corev1.ConfigMap)
			target = o.configMap
		case "v1/ServiceAccount":
			if o.serviceAccount != nil {
				return o, fmt.Errorf("two ServiceAccounts")
			}
			o.serviceAccount = new(corev1.ServiceAccount)
			target = o.serviceAccount
		case "v1/Service":
			if o.service != nil {
				return o, fmt.Errorf("two Services")
			}
			o.service = new(corev1.Service)
			target = o.service
		case "monitoring.coreos.com/v1/ServiceMonitor":
			if o.serviceMonitor != nil {
				return o, fmt.Errorf("two ServiceMonitors")
			}
			o.serviceMonitor = new(serviceMonitor)
			target = o.serviceMonitor
		default:
			return o, fmt.Errorf("%s: unexpected object %s", m.Source, gvk)
		}
		if err := decodeStrict(m.Content, target); err != nil {
			return o, fmt.Errorf("%s (%s %s): %w", m.Source, m.Version, m.Kind, err)
		}
	}
	if o.daemonSet == nil || o.configMap == nil {
		return o, fmt.Errorf("no DaemonSet or no ConfigMap")
	}
	return o, nil
}

// render renders the chart as release "kafkatrail-agent" in namespace "logging" with values
// (YAML, empty for the defaults), strictly (a reference to a value that does not exist fails),
// and decodes every object strictly.
func render(t *testing.T, values string) objects {
	t.Helper()
	r, err := Render(ChartDir, ManifestRelease, ManifestNamespace, parseValues(t, values), RenderOptions{Strict: true})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	o, err := decodeAll(r)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return o
}

// renderError renders with values and returns the error, failing the test if there is none.
func renderError(t *testing.T, values string) error {
	t.Helper()
	_, err := Render(ChartDir, ManifestRelease, ManifestNamespace, parseValues(t, values), RenderOptions{})
	if err == nil {
		t.Fatalf("rendering with\n%s\nsucceeded; want an error", strings.TrimSpace(values))
	}
	return err
}
