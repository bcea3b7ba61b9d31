package deploy

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// valueSets are the values every structural test renders with.
var valueSets = []struct{ name, values string }{
	{"defaults", ""},
	{"everything", fullValues},
}

// each runs f on the chart rendered with every value set.
func each(t *testing.T, f func(t *testing.T, o objects)) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) { f(t, render(t, vs.values)) })
	}
}

// The chart lints as `helm lint` would, with the defaults and with everything on: no error and
// no warning (the one INFO, a missing icon, is logged).
func TestLint(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			msgs := Lint(ChartDir, ManifestNamespace, parseValues(t, vs.values))
			for _, m := range msgs {
				if m.Severity >= support.WarningSev {
					t.Errorf("lint: %s", m)
				} else {
					t.Logf("lint: %s", m)
				}
			}
		})
	}
}

// Every object decodes strictly into its type (decodeAll), is in the release's namespace,
// and the optional ones appear only when asked for.
func TestRenderedObjects(t *testing.T) {
	each(t, func(t *testing.T, o objects) {
		var kinds []string
		for _, m := range o.rendered.Manifests {
			kinds = append(kinds, m.Kind)
		}
		want := []string{"ServiceAccount", "ConfigMap", "DaemonSet"}
		if o.serviceMonitor != nil {
			want = []string{"ServiceAccount", "ConfigMap", "Service", "DaemonSet", "ServiceMonitor"}
		}
		if !slices.Equal(kinds, want) {
			t.Errorf("objects in install order: got %v, want %v", kinds, want)
		}
		metas := []metav1.ObjectMeta{o.daemonSet.ObjectMeta, o.configMap.ObjectMeta, o.serviceAccount.ObjectMeta}
		if o.service != nil {
			metas = append(metas, o.service.ObjectMeta)
		}
		if o.serviceMonitor != nil {
			metas = append(metas, o.serviceMonitor.Metadata)
		}
		for _, m := range metas {
			if m.Namespace != ManifestNamespace {
				t.Errorf("%s: namespace %q, want %q", m.Name, m.Namespace, ManifestNamespace)
			}
		}
		if (o.service == nil) != (o.serviceMonitor == nil) {
			t.Error("the headless Service comes with the ServiceMonitor, and only with it")
		}
		if !strings.Contains(o.rendered.Notes, "rollout status daemonset/kafkatrail-agent") {
			t.Errorf("NOTES.txt: %s", o.rendered.Notes)
		}
	})
}

// The strict decoding that the other tests rely on does refuse what the API server's strict
// field validation refuses: a misspelt field, a field in the wrong case, a field given twice.
func TestDecodeStrictRefusesUnknownFields(t *testing.T) {
	o := render(t, "")
	var ds string
	for _, m := range o.rendered.Manifests {
		if m.Kind == "DaemonSet" {
			ds = m.Content
		}
	}
	for _, c := range []struct{ old, new string }{
		{"terminationGracePeriodSeconds:", "terminationGracePeriod:"},
		{"readOnlyRootFilesystem:", "readOnlyRootFileSystem:"},
		{"  updateStrategy:\n", "  updateStrategy:\n    type: OnDelete\n"},
	} {
		bad := strings.Replace(ds, c.old, c.new, 1)
		if bad == ds {
			t.Fatalf("%q not in the DaemonSet", c.old)
		}
		if err := decodeStrict(bad, new(appsv1.DaemonSet)); err == nil {
			t.Errorf("%q as %q decoded without an error", c.old, c.new)
		} else {
			t.Logf("%q as %q: %v", c.old, c.new, err)
		}
	}
}

// Names the API server would refuse, which strict decoding cannot see: objects', volumes',
// ports', variables', labels' and annotations'.
func TestNamesAreValid(t *testing.T) {
	each(t, func(t *testing.T, o objects) {
		check := func(what, name string, problems []string) {
			if len(problems) > 0 {
				t.Errorf("%s %q: %s", what, name, strings.Join(problems, "; "))
			}
		}
		metas := []metav1.ObjectMeta{o.daemonSet.ObjectMeta, o.configMap.ObjectMeta, o.serviceAccount.ObjectMeta, o.daemonSet.Spec.Template.ObjectMeta}
		if o.service != nil {
			metas = append(metas, o.service.ObjectMeta, o.serviceMonitor.Metadata)
			check("Service name", o.service.Name, validation.IsDNS1035Label(o.service.Name))
		}
		for _, m := range metas {
			if m.Name != "" {
				check("object name", m.Name, validation.IsDNS1123Subdomain(m.Name))
			}
			for k, v := range m.Labels {
				check("label", k, validation.IsQualifiedName(k))
				check("label value", v, validation.IsValidLabelValue(v))
			}
			for k := range m.Annotations {
				check("annotation", k, validation.IsQualifiedName(k))
			}
		}
		pod := o.daemonSet.Spec.Template.Spec
		for _, v := range pod.Volumes {
			check("volume", v.Name, validation.IsDNS1123Label(v.Name))
		}
		c := o.container(t)
		for _, p := range c.Ports {
			check("port", p.Name, validation.IsValidPortName(p.Name))
		}
		for _, e := range c.Env {
			check("variable", e.Name, validation.IsEnvVarName(e.Name))
		}
		for k := range o.configMap.Data {
			check("ConfigMap key", k, validation.IsConfigMapKey(k))
		}
	})
}

// The node's logs are mounted read-only, the state directory read-write at config's
// state-dir, on a hostPath that survives the pod; every mount has its volume.
func TestHostPathMounts(t *testing.T) {
	each(t, func(t *testing.T, o objects) {
		c := o.container(t)
		volumes := map[string]corev1.Volume{}
		for _, v := range o.daemonSet.Spec.Template.Spec.Volumes {
			volumes[v.Name] = v
		}
		mounts := map[string]corev1.VolumeMount{}
		for _, m := range c.VolumeMounts {
			if _, ok := volumes[m.Name]; !ok {
				t.Errorf("mount %s: no such volume", m.Name)
			}
			mounts[m.Name] = m
		}
		stateDir := o.agentYAML(t)["state-dir"]
		want := map[string]struct {
			hostPath  string
			mountPath string
			readOnly  bool
		}{
			"varlog":           {"/var/log", "/var/log", true},
			"dockercontainers": {"/var/lib/docker/containers", "/var/lib/docker/containers", true},
			"state":            {"/var/lib/kafkatrail-agent", fmt.Sprint(stateDir), false},
		}
		for name, w := range want {
			v, m := volumes[name], mounts[name]
			if v.HostPath == nil || v.HostPath.Path != w.hostPath {
				t.Errorf("volume %s: want hostPath %s, got %+v", name, w.hostPath, v.VolumeSource)
			}
			if m.MountPath != w.mountPath || m.ReadOnly != w.readOnly {
				t.Errorf("mount %s: got %s read-only %v, want %s read-only %v", name, m.MountPath, m.ReadOnly, w.mountPath, w.readOnly)
			}
		}
		if s := volumes["state"].HostPath; s == nil || s.Type == nil || *s.Type != corev1.HostPathDirectoryOrCreate {
			t.Errorf("state volume: want type DirectoryOrCreate, got %+v", s)
		}
		if stateDir != "/var/lib/kafkatrail" {
			t.Errorf("agent.yaml state-dir: %v", stateDir)
		}
		if m := mounts["config"]; m.MountPath != "/etc/kafkatrail" || !m.ReadOnly || volumes["config"].ConfigMap == nil ||
			volumes["config"].ConfigMap.Name != o.configMap.Name {
			t.Errorf("config: mount %+v, volume %+v", m, volumes["config"].VolumeSource)
		}
		// Only the state directory is written: every other mount of a host path or of
		// configuration is read-only.
		for name, m := range mounts {
			if name != "state" && !m.ReadOnly {
				t.Errorf("mount %s (%s) is writable", name, m.MountPath)
			}
		}
	})
}

// The probes reach /healthz and /readyz on the port the agent's --http listens on.
func TestProbes(t *testing.T) {
	each(t, func(t *testing.T, o objects) {
		c := o.container(t)
		i := slices.Index(c.Args, "--http")
		if i < 0 || i+1 >= len(c.Args) {
			t.Fatalf("args %q: no --http", c.Args)
		}
		host, port, ok := strings.Cut(c.Args[i+1], ":")
		if !ok || host != "0.0.0.0" {
			t.Errorf("--http %s: want 0.0.0.0:PORT (the kubelet probes the pod's IP)", c.Args[i+1])
		}
		if len(c.Ports) != 1 || c.Ports[0].Name != "http" || strconv.Itoa(int(c.Ports[0].ContainerPort)) != port {
			t.Fatalf("ports %+v: want http on %s", c.Ports, port)
		}
		if port != "8686" {
			t.Errorf("port %s, want the default 8686", port)
		}
		for _, p := range []struct {
			probe *corev1.Probe
			path  string
		}{{c.LivenessProbe, "/healthz"}, {c.ReadinessProbe, "/readyz"}} {
			if p.probe == nil || p.probe.HTTPGet == nil {
				t.Errorf("%s: no httpGet probe", p.path)
				continue
			}
			g := p.probe.HTTPGet
			if g.Path != p.path || g.Port != intstr.FromString("http") {
				t.Errorf("probe %+v: want %s on port http", g, p.path)
			}
		}
		if i := slices.Index(c.Args, "--config"); i < 0 || c.Args[i+1] != "/etc/kafkatrail/agent.yaml" {
			t.Errorf("args %q: want --config /etc/kafkatrail/agent.yaml", c.Args)
		}
		a := o.daemonSet.Spec.Template.Annotations
		if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != port || a["prometheus.io/path"] != "/metrics" {
			t.Errorf("prometheus.io annotations: %v", a)
		}
	})
}

// Kubernetes waits longer than the agent's shutdown-timeout before it kills the agent.
func TestTerminationGracePeriod(t *testing.T) {
	each(t, func(t *testing.T, o objects) {
		timeout, err := time.ParseDuration(fmt.Sprint(o.agentYAML(t)["shutdown-timeout"]))
		if err != nil {
			t.Fatal(err)
		}
		g := o.daemonSet.Spec.Template.Spec.TerminationGracePeriodSeconds
		if g == nil || time.Duration(*g)*time.Second < timeout+10*time.Second {
			t.Fatalf("terminationGracePeriodSeconds %v, shutdown-timeout %v: want at least 10 s more", g, timeout)
		}
		t.Logf("shutdown-timeout %v, terminationGracePeriodSeconds %d", timeout, *g)
	})
	if g := *render(t, "").daemonSet.Spec.Template.Spec.TerminationGracePeriodSeconds; g != 45 {
		t.Errorf("default terminationGracePeriodSeconds %d, want 45", g)
	}
}

// The template's own duration parser agrees with Go's (the agent's) on the forms a
// shutdown-timeout takes, and a grace period that is too short, or a timeout that is not a
// duration, is refused.
func TestTerminationGracePeriodFromShutdownTimeout(t *testing.T) {
	for _, timeout := range []string{"30s", "1m30s", "2m", "1.5m", "45.5s", "500ms", "1h", "1m0.25s", "90000ms"} {
		d, err := time.ParseDuration(timeout)
		if err != nil {
			t.Fatal(err)
		}
		want := int64(math.Ceil(d.Seconds())) + 15
		o := render(t, "config: {shutdown-timeout: "+timeout+"}")
		if g := *o.daemonSet.Spec.Template.Spec.TerminationGracePeriodSeconds; g != want {
			t.Errorf("shutdown-timeout %s: terminationGracePeriodSeconds %d, want %d", timeout, g, want)
		}
	}
	if g := *render(t, "terminationGracePeriodSeconds: 40").daemonSet.Spec.Template.Spec.TerminationGracePeriodSeconds; g != 40 {
		t.Errorf("terminationGracePeriodSeconds 40 (30s + 10 s) rendered as %d", g)
	}
	for _, values := range []string{
		"terminationGracePeriodSeconds: 39",
		"terminationGracePeriodSeconds: 100\nconfig: {shutdown-timeout: 2m}",
		"config: {shutdown-timeout: '30'}",
		"config: {shutdown-timeout: 30 seconds}",
	} {
		t.Logf("%s: %v", values, renderError(t, values))
	}
}

// The container has the least it needs to read root's 0640 files: root, but no capability,
// no privilege escalation, a read-only root filesystem, the runtime's seccomp profile, and
// nothing of the host's but the mounts.
func TestSecurityContext(t *testing.T) {
	each(t, func(t *testing.T, o objects) {
		c := o.container(t)
		pod := o.daemonSet.Spec.Template.Spec
		sc := c.SecurityContext
		if sc == nil {
			t.Fatal("no container securityContext")
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Error("readOnlyRootFilesystem is not true")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Error("allowPrivilegeEscalation is not false")
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Error("privileged")
		}
		if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
			t.Errorf("capabilities %+v: want drop [ALL], add none", sc.Capabilities)
		}
		if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("container seccompProfile %+v", sc.SeccompProfile)
		}
		psc := pod.SecurityContext
		if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("pod securityContext %+v: want seccompProfile RuntimeDefault", psc)
		}
		if psc.RunAsUser == nil || *psc.RunAsUser != 0 || psc.RunAsGroup == nil || *psc.RunAsGroup != 0 {
			t.Errorf("runAsUser %v runAsGroup %v: want 0 and 0 (root's 0640 log files)", psc.RunAsUser, psc.RunAsGroup)
		}
		if pod.HostNetwork || pod.HostPID || pod.HostIPC {
			t.Error("the pod shares the host's network, PIDs or IPC")
		}
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Error("the pod mounts a service account token")
		}
		if a := o.serviceAccount.AutomountServiceAccountToken; a == nil || *a {
			t.Error("the ServiceAccount mounts its token")
		}
		if pod.ServiceAccountName != o.serviceAccount.Name {
			t.Errorf("serviceAccountName %q, ServiceAccount %q", pod.ServiceAccountName, o.serviceAccount.Name)
		}
	})
	o := render(t, fullValues)
	if g := o.daemonSet.Spec.Template.Spec.SecurityContext; g.FSGroup == nil || *g.FSGroup != 2000 || !slices.Equal(g.SupplementalGroups, []int64{4}) {
		t.Errorf("fsGroup %v, supplementalGroups %v: want 2000 and [4]", g.FSGroup, g.SupplementalGroups)
	}
	if g := render(t, "").daemonSet.Spec.Template.Spec.SecurityContext; g.FSGroup != nil {
		t.Errorf("fsGroup %v by default", *g.FSGroup)
	}
}

// env returns the container's variables by name, failing on a name given twice (server-side
// apply refuses the object).
func env(t *testing.T, c corev1.Container) map[string]corev1.EnvVar {
	t.Helper()
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := m[e.Name]; dup {
			t.Errorf("env %s given twice", e.Name)
		}
		m[e.Name] = e
	}
	return m
}

// SASL's credentials come from the Secret through the environment; the ConfigMap holds the
// mechanism and the protocol, never a password, and the chart refuses one in config.
func TestSASLPasswordFromSecret(t *testing.T) {
	o := render(t, fullValues)
	e := env(t, o.container(t))
	for name, key := range map[string]string{"KAFKATRAIL_PRODUCER_SASL_USERNAME": "username", "KAFKATRAIL_PRODUCER_SASL_PASSWORD": "password"} {
		v, ok := e[name]
		if !ok || v.Value != "" || v.ValueFrom == nil || v.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s: %+v; want it from a Secret", name, v)
			continue
		}
		if r := v.ValueFrom.SecretKeyRef; r.Name != "kafka-user" || r.Key != key {
			t.Errorf("%s from Secret %s key %s; want kafka-user key %s", name, r.Name, r.Key, key)
		}
	}
	cm := o.configMap.Data["agent.yaml"]
	for _, s := range []string{"password", "sasl.username", "jaas", "kafka-user"} {
		if strings.Contains(cm, s) {
			t.Errorf("agent.yaml mentions %q:\n%s", s, cm)
		}
	}
	p := o.agentYAML(t)["producer"].(map[string]any)
	if p["security.protocol"] != "SASL_SSL" || p["sasl.mechanism"] != "SCRAM-SHA-256" {
		t.Errorf("producer %v: want SASL_SSL and SCRAM-SHA-256", p)
	}
	if len(o.configMap.BinaryData) > 0 {
		t.Error("the ConfigMap has binaryData")
	}
	// Nothing of SASL without the Secret.
	d := render(t, "")
	if _, ok := env(t, d.container(t))["KAFKATRAIL_PRODUCER_SASL_PASSWORD"]; ok {
		t.Error("SASL password variable without sasl.existingSecret")
	}
	if p := d.agentYAML(t)["producer"].(map[string]any); p["security.protocol"] != nil || p["sasl.mechanism"] != nil {
		t.Errorf("default producer %v sets security", p)
	}
	// SASL without TLS is SASL_PLAINTEXT; the user's own security.protocol wins.
	if p := render(t, "sasl: {existingSecret: s}").agentYAML(t)["producer"].(map[string]any); p["security.protocol"] != "SASL_PLAINTEXT" {
		t.Errorf("sasl alone: %v", p)
	}
	if p := render(t, "sasl: {existingSecret: s}\nconfig: {producer: {security.protocol: SASL_SSL}}").agentYAML(t)["producer"].(map[string]any); p["security.protocol"] != "SASL_SSL" {
		t.Errorf("config's security.protocol lost: %v", p)
	}
	for _, key := range []string{"sasl.password", "sasl.jaas.config", "sasl.oauthbearer.client.secret"} {
		err := renderError(t, "config: {producer: {"+key+": hunter2}}")
		if !strings.Contains(err.Error(), "sasl.existingSecret") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("config.producer.%s: %v", key, err)
		}
	}
	if err := renderError(t, "sasl: {existingSecret: s, mechanism: GSSAPI}"); !strings.Contains(err.Error(), "mechanism") {
		t.Errorf("an unknown mechanism: %v", err)
	}
}

// The TLS Secret is mounted read-only and the producer's ssl.* properties point into it.
func TestTLS(t *testing.T) {
	o := render(t, fullValues)
	c := o.container(t)
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if m.Name == "tls" {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil || !mount.ReadOnly || mount.MountPath != "/etc/kafkatrail-tls" {
		t.Fatalf("tls mount %+v", mount)
	}
	for _, v := range o.daemonSet.Spec.Template.Spec.Volumes {
		if v.Name == "tls" && (v.Secret == nil || v.Secret.SecretName != "kafka-cluster-ca" ||
			v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o440) {
			t.Errorf("tls volume %+v: want Secret kafka-cluster-ca, mode 0440", v.VolumeSource)
		}
	}
	p := o.agentYAML(t)["producer"].(map[string]any)
	for key, want := range map[string]string{
		"ssl.ca.location":          "/etc/kafkatrail-tls/ca.crt",
		"ssl.certificate.location": "/etc/kafkatrail-tls/tls.crt",
		"ssl.key.location":         "/etc/kafkatrail-tls/tls.key",
	} {
		if p[key] != want {
			t.Errorf("producer %s = %v, want %s", key, p[key], want)
		}
	}
	// TLS alone: SSL, the system roots unless a CA is given, no client certificate unless asked.
	p = render(t, "tls: {enabled: true}").agentYAML(t)["producer"].(map[string]any)
	if p["security.protocol"] != "SSL" || p["ssl.ca.location"] != nil {
		t.Errorf("tls.enabled alone: %v", p)
	}
	p = render(t, "tls: {existingSecret: ca}").agentYAML(t)["producer"].(map[string]any)
	if p["security.protocol"] != "SSL" || p["ssl.ca.location"] == nil || p["ssl.certificate.location"] != nil {
		t.Errorf("tls.existingSecret without clientCertificate: %v", p)
	}
}

// The config checksum annotation changes with the configuration, and only with it: a new
// config rolls the pods, a new label does not change the checksum.
func TestConfigChecksum(t *testing.T) {
	sum := func(values string) string {
		s := render(t, values).daemonSet.Spec.Template.Annotations["checksum/config"]
		if len(s) != 64 {
			t.Fatalf("checksum/config %q: want a sha256", s)
		}
		return s
	}
	base := sum("")
	for _, values := range []string{
		"config: {topic: logs}",
		"config: {producer: {linger.ms: 20}}",
		"tls: {existingSecret: ca}",
		"sasl: {existingSecret: s}",
	} {
		if sum(values) == base {
			t.Errorf("%s: the checksum did not change", values)
		}
	}
	for _, values := range []string{"podLabels: {a: b}", "resources: {requests: {cpu: 200m}}", "otel: {endpoint: http://c:4317}"} {
		if sum(values) != base {
			t.Errorf("%s changed the config checksum", values)
		}
	}
}

// The environment: the node's name from the downward API, defined before the variable that
// refers to it; OTLP export only with an endpoint; extraEnv after the chart's and able to
// override the exporters without a duplicate.
func TestEnv(t *testing.T) {
	each(t, func(t *testing.T, o objects) {
		c := o.container(t)
		e := env(t, c)
		idx := func(name string) int {
			return slices.IndexFunc(c.Env, func(v corev1.EnvVar) bool { return v.Name == name })
		}
		n := e["NODE_NAME"]
		if n.ValueFrom == nil || n.ValueFrom.FieldRef == nil || n.ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
			t.Errorf("NODE_NAME %+v: want fieldRef spec.nodeName", n)
		}
		if e["OTEL_RESOURCE_ATTRIBUTES"].Value != "k8s.node.name=$(NODE_NAME)" {
			t.Errorf("OTEL_RESOURCE_ATTRIBUTES %+v", e["OTEL_RESOURCE_ATTRIBUTES"])
		}
		if e["KAFKATRAIL_HOST_NAME"].Value != "$(NODE_NAME)" || idx("NODE_NAME") > idx("KAFKATRAIL_HOST_NAME") {
			t.Errorf("KAFKATRAIL_HOST_NAME %+v: want $(NODE_NAME), after NODE_NAME: the lines' host is the node", e["KAFKATRAIL_HOST_NAME"])
		}
		if idx("NODE_NAME") > idx("OTEL_RESOURCE_ATTRIBUTES") {
			t.Error("NODE_NAME comes after OTEL_RESOURCE_ATTRIBUTES: $(NODE_NAME) would not expand")
		}
		if ep, ok := e["OTEL_EXPORTER_OTLP_ENDPOINT"]; ok {
			if ep.Value != "http://otel-collector.observability.svc:4317" || e["OTEL_EXPORTER_OTLP_PROTOCOL"].Value != "grpc" {
				t.Errorf("OTLP: %+v %+v", ep, e["OTEL_EXPORTER_OTLP_PROTOCOL"])
			}
			if _, off := e["OTEL_TRACES_EXPORTER"]; off {
				t.Error("OTEL_TRACES_EXPORTER set with an endpoint")
			}
			if idx("KAFKATRAIL_TRANSACTIONAL_ID") < idx("NODE_NAME") {
				t.Error("extraEnv comes before NODE_NAME")
			}
		} else if e["OTEL_TRACES_EXPORTER"].Value != "none" || e["OTEL_METRICS_EXPORTER"].Value != "none" {
			t.Errorf("no endpoint: want the OTLP exporters off, got %+v %+v", e["OTEL_TRACES_EXPORTER"], e["OTEL_METRICS_EXPORTER"])
		}
	})
	o := render(t, "extraEnv: [{name: OTEL_TRACES_EXPORTER, value: console}]")
	e := env(t, o.container(t))
	if e["OTEL_TRACES_EXPORTER"].Value != "console" || e["OTEL_METRICS_EXPORTER"].Value != "none" {
		t.Errorf("extraEnv's OTEL_TRACES_EXPORTER: %+v %+v", e["OTEL_TRACES_EXPORTER"], e["OTEL_METRICS_EXPORTER"])
	}
}

// The pod template: labels the selector matches, the image, every node, resources, updates.
func TestPodTemplate(t *testing.T) {
	ch, err := loader.LoadDir(ChartDir)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.APIVersion != "v2" || ch.Metadata.Version != "0.1.1" || ch.Metadata.AppVersion != "0.1.1" {
		t.Errorf("Chart.yaml: %+v", ch.Metadata)
	}
	each(t, func(t *testing.T, o objects) {
		ds := o.daemonSet
		sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) {
			t.Errorf("selector %v does not match the pod's labels %v (%v)", ds.Spec.Selector, ds.Spec.Template.Labels, err)
		}
		c := o.container(t)
		tag := ch.Metadata.AppVersion
		if o.service != nil {
			tag = "0.1.0-rc1"
		}
		if c.Image != "ghcr.io/kafkatrail/kafkatrail-agent:"+tag || c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("image %s (%s)", c.Image, c.ImagePullPolicy)
		}
		pod := ds.Spec.Template.Spec
		if !slices.ContainsFunc(pod.Tolerations, func(tl corev1.Toleration) bool {
			return tl.Operator == corev1.TolerationOpExists && tl.Key == "" && tl.Effect == ""
		}) {
			t.Errorf("tolerations %+v: want one that tolerates every taint", pod.Tolerations)
		}
		r := c.Resources
		for _, q := range []struct {
			got  resource.Quantity
			want string
		}{{r.Requests[corev1.ResourceCPU], "100m"}, {r.Requests[corev1.ResourceMemory], "128Mi"}, {r.Limits[corev1.ResourceMemory], "512Mi"}} {
			if q.got.Cmp(resource.MustParse(q.want)) != 0 {
				t.Errorf("resources %+v: want %s", r, q.want)
			}
		}
		if _, ok := r.Limits[corev1.ResourceCPU]; ok {
			t.Error("a CPU limit")
		}
		u := ds.Spec.UpdateStrategy
		if u.Type != appsv1.RollingUpdateDaemonSetStrategyType || u.RollingUpdate == nil || u.RollingUpdate.MaxUnavailable == nil ||
			*u.RollingUpdate.MaxUnavailable != intstr.FromInt32(1) {
			t.Errorf("updateStrategy %+v", u)
		}
	})
	// The options of the full value set reach the pod.
	pod := render(t, fullValues).daemonSet.Spec.Template
	s := pod.Spec
	if len(s.ImagePullSecrets) != 1 || s.ImagePullSecrets[0].Name != "ghcr" || s.PriorityClassName != "system-node-critical" ||
		s.NodeSelector["kubernetes.io/os"] != "linux" || s.Affinity == nil || s.Affinity.NodeAffinity == nil ||
		pod.Labels["team"] != "platform" || pod.Annotations["team"] != "platform" {
		t.Errorf("pod template %+v", pod)
	}
}

// With serviceMonitor.enabled the ServiceMonitor selects the headless Service, which selects
// the agent's pods on the port named http, where /metrics is.
func TestServiceMonitor(t *testing.T) {
	o := render(t, fullValues)
	sm, svc := o.serviceMonitor, o.service
	if sm.APIVersion != "monitoring.coreos.com/v1" || sm.Metadata.Labels["release"] != "prometheus" {
		t.Errorf("ServiceMonitor %+v", sm.Metadata)
	}
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(svc.Labels)) {
		t.Errorf("the ServiceMonitor's selector %v does not match the Service's labels %v", sm.Spec.Selector, svc.Labels)
	}
	if !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{ManifestNamespace}) {
		t.Errorf("namespaceSelector %v", sm.Spec.NamespaceSelector)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service clusterIP %q, want None (headless)", svc.Spec.ClusterIP)
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(o.daemonSet.Spec.Template.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("the Service's selector %v does not match the pods' labels", svc.Spec.Selector)
	}
	if len(sm.Spec.Endpoints) != 1 || len(svc.Spec.Ports) != 1 {
		t.Fatalf("endpoints %+v, ports %+v", sm.Spec.Endpoints, svc.Spec.Ports)
	}
	ep, port := sm.Spec.Endpoints[0], svc.Spec.Ports[0]
	if ep.Port != port.Name || ep.Path != "/metrics" || port.TargetPort != intstr.FromString("http") || port.Port != 8686 {
		t.Errorf("endpoint %+v, port %+v", ep, port)
	}
	for _, d := range []string{ep.Interval, ep.ScrapeTimeout} {
		if _, err := time.ParseDuration(d); err != nil {
			t.Errorf("ServiceMonitor duration %q: %v", d, err)
		}
	}
}

// values.schema.json refuses a misspelt value, so that it cannot be ignored silently.
func TestSchemaRefusesUnknownValues(t *testing.T) {
	for _, values := range []string{
		"sasl: {existingsecret: s}",
		"tolerations: {operator: Exists}",
		"image: {pullPolicy: Sometimes}",
		"http: {port: '8686'}",
		"serviceMonitor: {enable: true}",
		"config: {state-dir: var/lib/kafkatrail}",
		"hostPath: {state: /x}",
	} {
		t.Logf("%s: %v", values, renderError(t, values))
	}
	// The state directory cannot be inside a read-only mount.
	for _, dir := range []string{"/var/log/kafkatrail", "/etc/kafkatrail", "/var/lib/docker/containers/x"} {
		if err := renderError(t, "config: {state-dir: "+dir+"}"); !strings.Contains(err.Error(), "read-only") {
			t.Errorf("state-dir %s: %v", dir, err)
		}
	}
}

// The chart README's table and values.yaml name the same values: every value is documented,
// and nothing documented is gone.
func TestReadmeListsEveryValue(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(ChartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(readme), "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			if name, _, ok = strings.Cut(name, "`"); ok && !strings.HasPrefix(name, "/") {
				listed[name] = true
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(ChartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	values := parseValues(t, string(data))
	var leaves []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		if !ok || len(m) == 0 || prefix == "resources" {
			leaves = append(leaves, prefix)
			return
		}
		if prefix == "config" || prefix == "config.producer" {
			leaves = append(leaves, prefix) // described itself, and key by key
		}
		for k, sub := range m {
			name := k
			if prefix != "" {
				name = prefix + "." + k
			}
			walk(name, sub)
		}
	}
	walk("", values)
	for _, name := range leaves {
		if name == "config.producer" {
			continue
		}
		if !listed[name] {
			t.Errorf("README.md does not list the value %s", name)
		}
		delete(listed, name)
	}
	for name := range listed {
		t.Errorf("README.md lists %s, which values.yaml does not have", name)
	}
}
