package linerecord

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkatrail/kafkatrail/filetail"
)

const testContainerID = "4f1c6d7e8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d"

func TestPodMetaFromKubeletNames(t *testing.T) {
	links := map[string]string{
		"/var/log/containers/web-7d9f_shop_nginx-" + testContainerID + ".log": "/var/log/pods/shop_web-7d9f_0c5e-uid/nginx/2.log",
		"/var/log/pods/shop_web-7d9f_0c5e-uid/nginx/2.log":                    "/var/lib/docker/containers/" + testContainerID + "/" + testContainerID + "-json.log",
		"/var/log/containers/api_prod_app-abc.log":                            "../pods/prod_api_9-uid/app/0.log", // relative
	}
	readlink := func(p string) (string, error) {
		if target, ok := links[p]; ok {
			return target, nil
		}
		return "", errors.New("not a link")
	}
	for _, c := range []struct {
		path                                 string
		ns, pod, uid, container, restart, id string
		nilMeta                              bool
	}{
		{path: "/var/log/containers/web-7d9f_shop_nginx-" + testContainerID + ".log",
			ns: "shop", pod: "web-7d9f", uid: "0c5e-uid", container: "nginx", restart: "2", id: testContainerID},
		{path: "/var/log/containers/api_prod_app-abc.log", ns: "prod", pod: "api", uid: "9-uid", container: "app", restart: "0", id: "abc"},
		{path: "/var/log/pods/kube-system_coredns-5d_77-uid/coredns/0.log", ns: "kube-system", pod: "coredns-5d", uid: "77-uid", container: "coredns", restart: "0"},
		// The kubelet's rotation: the same pod, whatever the suffix.
		{path: "/var/log/pods/kube-system_coredns-5d_77-uid/coredns/0.log.20261203-101010", ns: "kube-system", pod: "coredns-5d", uid: "77-uid", container: "coredns", restart: "0"},
		{path: "/var/log/pods/kube-system_coredns-5d_77-uid/coredns/0.log.20261203-101010.gz", ns: "kube-system", pod: "coredns-5d", uid: "77-uid", container: "coredns", restart: "0"},
		{path: "/var/log/app.log", nilMeta: true},
		{path: "/var/log/containers/no-underscores.log", nilMeta: true},
		{path: "/var/log/pods/bad-dir/app/0.log", nilMeta: true},
		{path: "/var/lib/docker/containers/" + testContainerID + "/" + testContainerID + "-json.log", nilMeta: true},
	} {
		m := readPodMeta(c.path, readlink)
		if c.nilMeta {
			if m != nil {
				t.Errorf("%s: metadata %+v, want none", c.path, m)
			}
			continue
		}
		if m == nil {
			t.Errorf("%s: no metadata", c.path)
			continue
		}
		got := []string{string(m.namespace), string(m.name), string(m.uid), string(m.container), string(m.restart), string(m.containerID)}
		want := []string{c.ns, c.pod, c.uid, c.container, c.restart, c.id}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s:\n got %q\nwant %q", c.path, got, want)
		}
	}
}

// kubeletTree makes a kubelet-like tree under dir: the pod's log file and the
// /var/log/containers symlink to it, and returns the symlink's path.
func kubeletTree(t *testing.T, dir string) string {
	t.Helper()
	podLog := filepath.Join(dir, "var/log/pods/shop_web-7d9f_0c5e-uid/nginx/0.log")
	if err := os.MkdirAll(filepath.Dir(podLog), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(podLog, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "var/log/containers/web-7d9f_shop_nginx-"+testContainerID+".log")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(podLog, link); err != nil {
		t.Fatal(err)
	}
	return link
}

// A container's line: routed by its namespace, headers from its pod and stream, the runtime's
// time as its CreateTime and @timestamp, and the pod in the envelope.
func TestContainerLineRecord(t *testing.T) {
	path := kubeletTree(t, t.TempDir())
	runtime := time.Date(2026, 12, 3, 10, 0, 0, 123456789, time.UTC)
	l := filetail.Line{Data: []byte("GET /health 200"), Start: 42, End: 100, Time: runtime.UnixNano(), Stream: filetail.StreamStderr}

	b := routedBuilder(t, func(c *Config) {
		c.Topic = "logs-{k8s.namespace.name}"
		c.Header = []string{"pod={k8s.pod.name}", "container={k8s.container.name}", "restarts={k8s.container.restart_count}",
			"uid={k8s.pod.uid}", "id={container.id}", "stream={log.iostream}"}
		c.Format = FormatJSON
	})
	r := b.buildLine(l, path)
	if r.Topic != "logs-shop" {
		t.Errorf("topic %q, want logs-shop", r.Topic)
	}
	var hdrs []string
	for _, h := range r.Headers {
		if strings.HasPrefix(h.Key, "source.") {
			continue // --header-path and --header-host
		}
		hdrs = append(hdrs, h.Key+"="+string(h.Value))
	}
	if got, want := strings.Join(hdrs, " "), "pod=web-7d9f container=nginx restarts=0 uid=0c5e-uid id="+testContainerID+" stream=stderr"; got != want {
		t.Errorf("headers\n got %s\nwant %s", got, want)
	}
	if !r.Timestamp.Equal(runtime.Truncate(time.Millisecond)) || !r.Written.Equal(runtime) {
		t.Errorf("timestamp %v written %v, want the runtime's %v", r.Timestamp, r.Written, runtime)
	}
	want := `{"@timestamp":"2026-12-03T10:00:00.123Z","message":"GET /health 200","host.name":` + string(b.enc.host) + `,"log.file.path":` +
		`"` + path + `","log.offset":42,"kubernetes.namespace":"shop","kubernetes.pod.name":"web-7d9f","kubernetes.pod.uid":"0c5e-uid",` +
		`"kubernetes.container.name":"nginx","container.id":"` + testContainerID + `","stream":"stderr"}`
	if string(r.Value) != want {
		t.Errorf("envelope\n got %s\nwant %s", r.Value, want)
	}

	// json-merge adds what the line does not have; raw keeps the line and takes the time.
	m := testBuilder(t, func(c *Config) { c.Format = FormatJSONMerge })
	l.Data = []byte(`{"msg":"hi","stream":"mine"}`)
	got := string(m.buildLine(l, path).Value)
	for _, s := range []string{`"kubernetes.namespace":"shop"`, `"container.id":"` + testContainerID + `"`, `"stream":"mine"`} {
		if !strings.Contains(got, s) {
			t.Errorf("json-merge: %s lacks %s", got, s)
		}
	}
	if strings.Contains(got, `"stream":"stderr"`) {
		t.Errorf("json-merge: the line's own stream field must win: %s", got)
	}
	raw := testBuilder(t, func(c *Config) {})
	if r := raw.buildLine(l, path); string(r.Value) != string(l.Data) || !r.Timestamp.Equal(runtime) {
		t.Errorf("raw: value %s timestamp %v", r.Value, r.Timestamp)
	}

	// A file that is not a container's has none of it: a template part of it is missing.
	other := filepath.Join(t.TempDir(), "app.log")
	r = b.buildLine(filetail.Line{Data: []byte("x")}, other)
	if b.rs.err == nil {
		t.Errorf("a line of %s was routed to %q: its namespace is missing", other, r.Topic)
	}
}

// --key takes the pod's fields (a template like --topic's): each container's lines keep their
// order on one partition. A line that lacks a part has no key; the key options exclude each
// other.
func TestKeyFromThePod(t *testing.T) {
	path := kubeletTree(t, t.TempDir())
	b := routedBuilder(t, func(c *Config) {
		c.Topic = "logs"
		c.Key = "{k8s.namespace.name}/{k8s.pod.name}/{k8s.container.name}"
		c.Header = []string{"stream={log.iostream}"}
	})
	l := filetail.Line{Data: []byte("GET /health 200"), Stream: filetail.StreamStdout}
	r := b.buildLine(l, path)
	if string(r.Key) != "shop/web-7d9f/nginx" || r.Topic != "logs" {
		t.Errorf("key %q topic %q, want shop/web-7d9f/nginx on logs", r.Key, r.Topic)
	}
	if got := testing.AllocsPerRun(1000, func() { b.buildLine(l, path) }); got != 0 {
		t.Errorf("%v allocations a line", got)
	}
	if r := b.buildLine(filetail.Line{Data: []byte("x")}, filepath.Join(t.TempDir(), "app.log")); r.Key != nil {
		t.Errorf("a line of a file that is not a container's: key %q, want none", r.Key)
	}
	// Beside a topic template and a JSON field of the line.
	j := routedBuilder(t, func(c *Config) {
		c.Topic = "logs-{k8s.namespace.name}"
		c.Key = "{k8s.pod.name}-{user}"
	})
	l.Data = []byte(`{"user":"ada"}`)
	if r := j.buildLine(l, path); string(r.Key) != "web-7d9f-ada" || r.Topic != "logs-shop" {
		t.Errorf("key %q topic %q, want web-7d9f-ada on logs-shop", r.Key, r.Topic)
	}

	cfg := defaultConfig()
	cfg.Topic, cfg.Key, cfg.KeyField = "t", "{k8s.pod.name}", "user"
	if err := cfg.check(); err == nil || !strings.Contains(err.Error(), "key") {
		t.Errorf("key and key-field: got %v, want an error naming key", err)
	}
	cfg.KeyField, cfg.Key = "", "{k8s.pod}"
	if err := cfg.check(); err == nil || !strings.Contains(err.Error(), "key") || !strings.Contains(err.Error(), "{k8s.pod.name}") {
		t.Errorf("an unknown k8s part in key: got %v, want an error naming the key and the known parts", err)
	}
}

func TestKubernetesTemplateNames(t *testing.T) {
	cfg := defaultConfig()
	cfg.Topic = "logs-{k8s.namespace}"
	err := cfg.check()
	if err == nil || !strings.Contains(err.Error(), "topic") || !strings.Contains(err.Error(), "{k8s.namespace.name}") {
		t.Fatalf("an unknown k8s part: got %v, want an error naming the key and the known parts", err)
	}
}

// The pod's metadata is read once per path, not per line: building a container's line costs no
// allocation.
func TestContainerLineAllocations(t *testing.T) {
	path := kubeletTree(t, t.TempDir())
	b := routedBuilder(t, func(c *Config) {
		c.Topic = "logs-{k8s.namespace.name}"
		c.Format = FormatJSON
	})
	l := filetail.Line{Data: []byte("GET /health 200"), Start: 42, End: 100, Time: time.Now().UnixNano(), Stream: filetail.StreamStdout}
	b.buildLine(l, path)
	if got := testing.AllocsPerRun(1000, func() { b.buildLine(l, path) }); got != 0 {
		t.Errorf("%v allocations a line", got)
	}
}

// The host name is what lines carry as their host (in a pod the system's host name is the
// pod's).
func TestHostNameKey(t *testing.T) {
	cfg := defaultConfig()
	cfg.HostName, cfg.Topic, cfg.Format = "node-7", "logs-{host}", FormatJSON
	if err := cfg.check(); err != nil {
		t.Fatal(err)
	}
	b := newRecordBuilder(&cfg)
	r := b.buildLine(filetail.Line{Data: []byte("x")}, "/var/log/app.log")
	if r.Topic != "logs-node-7" || !strings.Contains(string(r.Value), `"host.name":"node-7"`) {
		t.Errorf("topic %q, value %s: want the host name node-7", r.Topic, r.Value)
	}
}
