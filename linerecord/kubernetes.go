package linerecord

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// podMeta is what the kubelet's file names say about the container that wrote a log file: no
// API server is asked (pod labels would need one). A field the names do not give is empty.
//
//	/var/log/containers/<pod>_<namespace>_<container>-<container id>.log
//	    a symlink to
//	/var/log/pods/<namespace>_<pod>_<pod uid>/<container>/<restart count>.log
//	    which, with docker's json-file runtime, is a symlink to
//	/var/lib/docker/containers/<container id>/<container id>-json.log
//
// The kubelet's rotation renames <n>.log to <n>.log.<time> (and gzips older ones): those names
// give the same fields.
type podMeta struct {
	namespace, name, uid, container, restart, containerID []byte
	// envelope is the JSON envelope's fields of the pod, `,"kubernetes.namespace":"…",…`:
	// formatted once per file, not per line.
	envelope []byte
}

// The JSON envelope's names for the pod's fields (ECS), and the template names (the OpenTelemetry
// resource conventions) that take them.
const (
	fieldK8sNamespace   = "kubernetes.namespace"
	fieldK8sPodName     = "kubernetes.pod.name"
	fieldK8sPodUID      = "kubernetes.pod.uid"
	fieldK8sContainer   = "kubernetes.container.name"
	fieldContainerID    = "container.id"
	fieldStream         = "stream"
	templateK8sNS       = "k8s.namespace.name"
	templateK8sPod      = "k8s.pod.name"
	templateK8sUID      = "k8s.pod.uid"
	templateK8sCont     = "k8s.container.name"
	templateK8sRestart  = "k8s.container.restart_count"
	templateContainerID = "container.id"
	templateStream      = "log.iostream"
)

// podCache holds the podMeta of each path seen (nil for a path that is not a kubelet's), so that
// a file's names are read (and its symlinks followed) once, not per line. Its size is bounded:
// pods come and go, and a full cache starts again empty.
type podCache struct {
	mu    sync.RWMutex
	paths map[string]*podMeta
}

// maxCachedPaths bounds podCache: far more files than one node's containers keep open.
const maxCachedPaths = 8192

// pods is the process's podCache: a path's metadata depends on the file system only.
var pods = &podCache{paths: make(map[string]*podMeta)}

// of returns the metadata of the container log at path, nil when path is not one.
func (c *podCache) of(path string) *podMeta {
	if !strings.Contains(path, "/containers/") && !strings.Contains(path, "/pods/") {
		return nil
	}
	c.mu.RLock()
	m, ok := c.paths[path]
	c.mu.RUnlock()
	if ok {
		return m
	}
	m = readPodMeta(path, os.Readlink)
	c.mu.Lock()
	if len(c.paths) >= maxCachedPaths {
		c.paths = make(map[string]*podMeta)
	}
	c.paths[path] = m
	c.mu.Unlock()
	return m
}

// readPodMeta reads path's names, and those of the symlinks it leads through (at most two: a
// /var/log/containers link to the /var/log/pods file, and that to docker's), with readlink.
func readPodMeta(path string, readlink func(string) (string, error)) *podMeta {
	var m podMeta
	found := false
	for hop := 0; hop < 3 && path != ""; hop++ {
		found = m.parse(path) || found
		target, err := readlink(path)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	if !found {
		return nil
	}
	m.envelope = m.appendEnvelope(nil)
	return &m
}

// parse takes what one name says; it reports whether it was a kubelet's (or docker's) name.
func (m *podMeta) parse(path string) bool {
	dir, base := filepath.Split(path)
	dir = filepath.Clean(dir)
	stem, _, _ := strings.Cut(base, ".log") // <n>.log.<time>.gz: <n>
	switch {
	case filepath.Base(dir) == "containers" && strings.HasSuffix(base, ".log") && !strings.HasSuffix(base, "-json.log"):
		// <pod>_<namespace>_<container>-<id>.log
		parts := strings.SplitN(strings.TrimSuffix(base, ".log"), "_", 3)
		if len(parts) != 3 {
			return false
		}
		i := strings.LastIndexByte(parts[2], '-')
		if i <= 0 {
			return false
		}
		m.set(&m.name, parts[0])
		m.set(&m.namespace, parts[1])
		m.set(&m.container, parts[2][:i])
		m.set(&m.containerID, parts[2][i+1:])
		return true
	case filepath.Base(filepath.Dir(filepath.Dir(dir))) == "pods":
		// pods/<namespace>_<pod>_<uid>/<container>/<n>.log
		podDir, container := filepath.Split(dir)
		parts := strings.SplitN(filepath.Base(podDir), "_", 3)
		if len(parts) != 3 {
			return false
		}
		m.set(&m.namespace, parts[0])
		m.set(&m.name, parts[1])
		m.set(&m.uid, parts[2])
		m.set(&m.container, container)
		if allDigits([]byte(stem)) && stem != "" {
			m.set(&m.restart, stem)
		}
		return true
	case strings.HasSuffix(base, "-json.log") && filepath.Base(filepath.Dir(dir)) == "containers":
		// docker: containers/<id>/<id>-json.log
		m.set(&m.containerID, filepath.Base(dir))
		return false // a docker container's, not a pod's
	}
	return false
}

// set fills a field that an earlier name did not.
func (m *podMeta) set(field *[]byte, v string) {
	if len(*field) == 0 && v != "" {
		*field = []byte(v)
	}
}

// podField is one of the envelope's fields of a pod.
type podField struct {
	name  string
	value []byte
}

// envelopeFields are the pod's fields as the JSON envelope names them.
func (m *podMeta) envelopeFields() [5]podField {
	return [...]podField{
		{fieldK8sNamespace, m.namespace}, {fieldK8sPodName, m.name}, {fieldK8sPodUID, m.uid},
		{fieldK8sContainer, m.container}, {fieldContainerID, m.containerID},
	}
}

func (m *podMeta) appendEnvelope(b []byte) []byte {
	for _, f := range m.envelopeFields() {
		if len(f.value) > 0 {
			b = append(b, `,"`+f.name+`":`...)
			b, _ = appendJSONString(b, f.value, -1)
		}
	}
	return b
}

// field returns the template value of name ({k8s.namespace.name}, …), ok false when the file's
// names do not give it.
func (m *podMeta) field(kind partKind) []byte {
	if m == nil {
		return nil
	}
	switch kind {
	case partK8sNamespace:
		return m.namespace
	case partK8sPod:
		return m.name
	case partK8sUID:
		return m.uid
	case partK8sContainer:
		return m.container
	case partK8sRestart:
		return m.restart
	case partContainerID:
		return m.containerID
	}
	return nil
}
